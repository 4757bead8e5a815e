//! The loop shared by the consumer and the relay, batched or not: pull deliveries, settle them
//! with bounded concurrency, stop at shutdown after the in-flight ones are settled.

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tracing::error;

use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::error::{BoxError, Error, error_chain};
use crate::kill_switch::KillSwitch;
use crate::rate_limit::RateLimit;

/// How long shutdown waits for an in-order delivery being settled before leaving it unacked.
const IN_ORDER_GRACE: Duration = Duration::from_secs(10);

/// Pulls from `source` until it ends or `shutdown` resolves, and settles what it delivers in
/// batches with `settle`: a task of its own reads `source` (so that waiting for a batch to
/// fill never cancels a broker read in flight) into a channel of `max` deliveries, and a batch
/// is what arrives within `linger` of its first delivery, up to `max` (a batch of one, at once,
/// when `max` is 1: the single-delivery path is this loop too). At most `concurrency` batches
/// are settled at once; a batch of [`AckOrdering::InOrder`] deliveries alone, after everything
/// before it. At shutdown the reader stops, and the deliveries already received are settled
/// before this returns, so nothing is dropped between its commit and its ack. While `switch`
/// is open no batch is taken; the first one after its pause is its probe
/// ([`KillSwitch::admit`]). Under `limit`'s overall limit a batch is settled only with a permit
/// for each of its deliveries, and is only as large as the permits at hand ([`RateLimit`]).
///
/// # Errors
/// The source failed (after what it delivered is settled), or an in-order batch could not be
/// settled with the broker (settling past it would ack it).
pub(crate) async fn drive<Src, F, Fut>(
    source: Src,
    shutdown: impl Future,
    concurrency: usize,
    (max, linger): (usize, Duration),
    switch: Option<KillSwitch>,
    limit: Option<RateLimit>,
    settle: F,
) -> Result<(), Error>
where
    Src: DeliverySource + 'static,
    F: Fn(Vec<Src::Delivery>) -> Fut,
    Fut: Future<Output = Result<(), Error>> + Send + 'static,
{
    let max = max.max(1);
    let (tx, mut rx) = tokio::sync::mpsc::channel(max);
    let (stop_reading, stop) = oneshot::channel();
    let mut stop_reading = Some(stop_reading);
    let mut reader = AbortOnDrop(tokio::spawn(read_into(source, tx, stop)));
    // Stops the reader but keeps the source: dropping it would close what the deliveries in
    // flight are acked through (a channel, a session), and their acks would fail.
    let mut stop_reader = || {
        if let Some(stop) = stop_reading.take() {
            let _ = stop.send(());
        }
    };
    tokio::pin!(shutdown);
    let mut stopping = false;
    let mut tasks: JoinSet<Result<(), Error>> = JoinSet::new();
    let result = loop {
        while tasks.len() >= concurrency.max(1) {
            if let Some(joined) = tasks.join_next().await {
                log_task(joined);
            }
        }
        let (probe, first, room) = if stopping {
            (false, rx.try_recv().ok(), max)
        } else {
            let admitted = async {
                let probe = match &switch {
                    Some(switch) => switch.admit().await,
                    None => false,
                };
                let first = rx.recv().await;
                // Once there is a delivery to take them for: a consumer waiting for work
                // spends no permits that others sharing the limit could use.
                let room = match (&limit, &first) {
                    (Some(limit), Some(_)) => limit.take(max).await,
                    _ => max,
                };
                (probe, first, room)
            };
            tokio::select! {
                _ = &mut shutdown => {
                    stopping = true;
                    stop_reader();
                    continue;
                }
                admitted = admitted => admitted,
            }
        };
        let probing = switch.as_ref().filter(|_| probe).cloned();
        let Some(first) = first else {
            break Ok(());
        };
        let mut batch = vec![first];
        // This batch's bound: the permits taken for it.
        let max = room.max(1);
        let deadline = tokio::time::Instant::now() + linger;
        // What is queued already is taken without a timer; only an empty queue waits out
        // the linger (a timer armed per delivery cost the relay a good part of its CPU).
        while batch.len() < max {
            while batch.len() < max
                && let Ok(delivery) = rx.try_recv()
            {
                batch.push(delivery);
            }
            if batch.len() >= max || stopping {
                break;
            }
            let room = max - batch.len();
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut batch, room)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        if batch[0].ack_ordering() != AckOrdering::InOrder {
            let settling = settle(batch);
            tasks.spawn(async move {
                let settled = settling.await;
                if let Some(switch) = probing {
                    switch.probe_ended();
                }
                settled
            });
            continue;
        }
        while let Some(joined) = tasks.join_next().await {
            log_task(joined);
        }
        let settling = async {
            let settled = settle(batch).await;
            if let Some(switch) = &probing {
                switch.probe_ended();
            }
            settled
        };
        tokio::pin!(settling);
        // At shutdown an in-order batch retrying in place (the database is down) gets a
        // grace, then is left unacked for the broker to deliver again after the restart.
        if !stopping {
            tokio::select! {
                settled = &mut settling => match settled {
                    Ok(()) => continue,
                    Err(e) => break Err(e),
                },
                _ = &mut shutdown => {
                    stopping = true;
                    stop_reader();
                }
            }
        }
        match tokio::time::timeout(IN_ORDER_GRACE, settling).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => break Err(e),
            Err(_) => break Ok(()),
        }
    };
    while let Some(joined) = tasks.join_next().await {
        log_task(joined);
    }
    // Everything received is settled: the source may close now.
    stop_reader();
    let read = match (&mut reader.0).await {
        Ok((source, read)) => {
            source.close().await;
            read
        }
        // A panic in the source is the source's failure, not its end.
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Ok(()),
    };
    match read {
        Err(e) if result.is_ok() => Err(Error::Broker(e)),
        _ => result,
    }
}

/// The reader task, stopped when the loop's future is dropped mid-run, so that it does not
/// keep the source (a group membership, a prefetch) alive on its own.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads `source` into `tx` until either ends or `stop`; the source's error, if that is what
/// ended it, and the source itself, kept open for the acks of what it delivered. While `tx` is
/// full (the loop takes nothing: a delivery retried in place, an open switch) the source idles
/// ([`DeliverySource::idle`]), keeping its session alive. A delivery read but not yet handed
/// on when `stop` comes is dropped unacked: the broker delivers it again.
async fn read_into<Src: DeliverySource>(
    mut source: Src,
    tx: tokio::sync::mpsc::Sender<Src::Delivery>,
    mut stop: oneshot::Receiver<()>,
) -> (Src, Result<(), BoxError>) {
    let read = async {
        loop {
            let next = tokio::select! {
                next = source.next() => next,
                _ = &mut stop => return Ok(()),
            };
            let Some(next) = next else {
                return Ok(());
            };
            let delivery = next?;
            // Room at once, most of the time: no idle future, no timer.
            let room = match tx.try_reserve() {
                Ok(room) => Ok(room),
                Err(TrySendError::Closed(())) => return Ok(()),
                Err(TrySendError::Full(())) => tokio::select! {
                    room = tx.reserve() => room,
                    () = source.idle() => tokio::select! {
                        room = tx.reserve() => room,
                        _ = &mut stop => return Ok(()),
                    },
                    _ = &mut stop => return Ok(()),
                },
            };
            let Ok(room) = room else {
                return Ok(());
            };
            room.send(delivery);
        }
    }
    .await;
    (source, read)
}

fn log_task<T>(joined: Result<Result<T, Error>, tokio::task::JoinError>) {
    match joined {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => error!(
            error = error_chain(&e),
            "could not settle a delivery with the broker"
        ),
        Err(e) => error!(error = %e, "delivery task failed"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use crate::delivery::{Delivery, DeliverySource};
    use crate::error::BoxError;
    use crate::{Envelope, EnvelopeError, MessageId};

    type Log = Arc<Mutex<Vec<String>>>;

    struct Numbered(u32, Log);

    impl Delivery for Numbered {
        fn envelope(&self) -> Result<Envelope, EnvelopeError> {
            Ok(Envelope::new(
                MessageId::new(self.0.to_string())?,
                Vec::new(),
            ))
        }

        fn payload(&self) -> &[u8] {
            &[]
        }

        async fn ack(self) -> Result<(), BoxError> {
            self.1.lock().unwrap().push(format!("acked {}", self.0));
            Ok(())
        }

        async fn requeue(self, _: Option<Duration>) -> Result<(), BoxError> {
            Ok(())
        }

        async fn reject(self) -> Result<(), BoxError> {
            Ok(())
        }
    }

    /// Three deliveries, then nothing until stopped; its close is logged.
    struct Three(u32, Log);

    impl DeliverySource for Three {
        type Delivery = Numbered;

        async fn next(&mut self) -> Option<Result<Numbered, BoxError>> {
            if self.0 == 3 {
                std::future::pending::<()>().await;
            }
            self.0 += 1;
            Some(Ok(Numbered(self.0, Arc::clone(&self.1))))
        }

        async fn close(self) {
            self.1.lock().unwrap().push("closed".to_owned());
        }
    }

    /// At shutdown the source is closed, and only after every delivery it gave is settled: a
    /// source dropped instead (as before) logs no close, one closed first logs it before an ack.
    #[tokio::test]
    async fn the_source_closes_after_everything_it_gave_is_settled() {
        let log: Log = Arc::default();
        let shutdown = tokio::time::sleep(Duration::from_millis(200));
        let settle = |deliveries: Vec<Numbered>| async move {
            for d in deliveries {
                tokio::time::sleep(Duration::from_millis(20)).await;
                d.ack().await.map_err(crate::error::Error::Broker)?;
            }
            Ok(())
        };
        let source = Three(0, Arc::clone(&log));
        let limits = (1, Duration::ZERO);
        super::drive(source, shutdown, 2, limits, None, None, settle)
            .await
            .unwrap();
        let log = log.lock().unwrap().clone();
        assert_eq!(log.len(), 4, "{log:?}");
        assert_eq!(log.last().map(String::as_str), Some("closed"), "{log:?}");
    }
}
