//! The loop shared by the consumer and the relay: pull deliveries, settle each with bounded
//! concurrency, stop at shutdown after the in-flight ones are settled.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinSet;
use tracing::error;

use crate::delivery::{AckOrdering, Delivery, DeliverySource};
use crate::error::Error;

/// How long shutdown waits for an in-order delivery being settled before leaving it unacked.
const IN_ORDER_GRACE: Duration = Duration::from_secs(10);

/// Pulls from `source` until it ends or `shutdown` resolves, settling each delivery with
/// `settle`: at most `concurrency` at once, and an [`AckOrdering::InOrder`] delivery alone,
/// after everything before it. In-flight settles finish before this returns, so nothing is
/// dropped between its commit and its ack.
///
/// # Errors
/// The source failed, or an in-order delivery could not be settled with the broker (settling
/// past it would ack it).
pub(crate) async fn drive<Src, F, Fut, T>(
    mut source: Src,
    shutdown: impl Future<Output = ()>,
    concurrency: usize,
    settle: F,
) -> Result<(), Error>
where
    Src: DeliverySource,
    F: Fn(Src::Delivery) -> Fut,
    Fut: Future<Output = Result<T, Error>> + Send + 'static,
    T: Send + 'static,
{
    tokio::pin!(shutdown);
    let mut tasks: JoinSet<Result<T, Error>> = JoinSet::new();
    let result = loop {
        while tasks.len() >= concurrency.max(1) {
            if let Some(joined) = tasks.join_next().await {
                log_task(joined);
            }
        }
        let next = tokio::select! {
            () = &mut shutdown => break Ok(()),
            next = source.next() => next,
        };
        let delivery = match next {
            None => break Ok(()),
            Some(Err(e)) => break Err(Error::Broker(e)),
            Some(Ok(d)) => d,
        };
        if delivery.ack_ordering() == AckOrdering::InOrder {
            // Everything before it settles first; an error ends the loop after draining.
            while let Some(joined) = tasks.join_next().await {
                log_task(joined);
            }
            // It may be retrying in place (the database is down): shutdown interrupts it after a
            // grace, unacked, and the broker delivers it again after the restart.
            let settling = settle(delivery);
            tokio::pin!(settling);
            let settled = tokio::select! {
                settled = &mut settling => settled,
                () = &mut shutdown => {
                    match tokio::time::timeout(IN_ORDER_GRACE, settling).await {
                        Ok(Err(e)) => break Err(e),
                        _ => break Ok(()),
                    }
                }
            };
            if let Err(e) = settled {
                break Err(e);
            }
            continue;
        }
        tasks.spawn(settle(delivery));
    };
    while let Some(joined) = tasks.join_next().await {
        log_task(joined);
    }
    result
}

fn log_task<T>(joined: Result<Result<T, Error>, tokio::task::JoinError>) {
    match joined {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => error!(error = %e, "could not settle a delivery with the broker"),
        Err(e) => error!(error = %e, "delivery task failed"),
    }
}
