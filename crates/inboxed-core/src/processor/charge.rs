//! What a delivery's attempt is charged: counted before the handler runs, and forgiven when
//! the failure was not the message's (a delivery that never ran, a retry the handler asked
//! for, an outage the kill switch judged).

use tracing::warn;

use super::Processor;
use crate::envelope::Envelope;
use crate::error::StoreError;
use crate::handler::Handler;
use crate::kill_switch::Judged;
use crate::store::{Counted, KeyParams, Store};

impl<S: Store, H: Handler<S::Db>> Processor<S, H> {
    /// Tells the kill switch that `envelope`'s delivery failed transiently (or the store failed
    /// under it); `charged`: its attempt was counted. When the switch is open, or this failure
    /// opened it, the attempts it names are forgiven (this one's, and those of the failures
    /// that opened it): an outage uses up no message's attempts. `true` when the failure must
    /// not dead-letter its message now: forgiven, or in doubt (an outage may be starting).
    pub(super) async fn judge_transient(&self, envelope: &Envelope, charged: bool) -> bool {
        let inner = &*self.inner;
        let judged = inner
            .config
            .kill_switch
            .failed(&inner.consumer, envelope.id(), charged);
        match judged {
            Judged::Charged { doubt } => doubt,
            Judged::Forgiven(keys) => {
                let forgiving = keys.iter().map(|(consumer, message_id)| async move {
                    let key = KeyParams {
                        consumer,
                        message_id,
                    };
                    self.forgive_attempt(&key).await;
                });
                futures_util::future::join_all(forgiving).await;
                true
            }
        }
    }

    /// Counts this delivery's attempt in the store, waiting for a lock at most `lock_timeout`
    /// (SQLite's count waits for the write lock). A wait given up is not retried here: like a
    /// claim that gave up, the delivery is requeued, and its count never landed.
    pub(super) async fn record_attempt(&self, key: &KeyParams<'_>) -> Result<Counted, StoreError> {
        let config = &self.inner.config;
        let waited_out = |e: &StoreError| matches!(e, StoreError::Timeout(_) | StoreError::Busy(_));
        config
            .contention_backoff
            .retrying(
                config.contention_retries,
                |e| e.is_transient() && !waited_out(e),
                || self.inner.store.record_attempt(key, config.lock_timeout),
            )
            .await
    }

    /// Forgives one attempt of a key: of a delivery that never ran (its begin or claim gave up
    /// waiting), one the handler asked to retry later, or one the kill switch judged an
    /// outage's. Before the requeue, waiting for the write at most a second: on SQLite it waits
    /// for the very write lock the delivery gave up on, and would hold the requeue as long.
    /// Past that it completes in the background, and a redelivery that comes first is counted
    /// without it.
    pub(super) async fn forgive_attempt(&self, key: &KeyParams<'_>) {
        let (store, consumer, id) = (
            self.inner.store.clone(),
            key.consumer.clone(),
            key.message_id.clone(),
        );
        let forgiving = tokio::spawn(async move {
            let key = KeyParams {
                consumer: &consumer,
                message_id: &id,
            };
            if let Err(e) = store.forgive(&key, 1).await {
                warn!(error = %e, "could not forgive an attempt that was not the message's fault");
            }
        });
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), forgiving).await;
    }
}
