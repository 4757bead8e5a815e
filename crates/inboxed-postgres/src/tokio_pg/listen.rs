//! `LISTEN` through tokio-postgres. A pooled connection's notifications are read by the task
//! deadpool-postgres spawned for it, which drops them, so a listener needs a connection made
//! for it: the store keeps how to make one ([`Listener`], from
//! [`TokioPgStore::connect`](super::TokioPgStore::connect) or
//! [`TokioPgStore::with_notifications`](super::TokioPgStore::with_notifications)).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::{Notify, mpsc};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{AsyncMessage, Client, Notification, Socket};

use inboxed_core::StoreError;
use inboxed_core::inbox::store::Subscription;

/// A connection made for listening, and its notifications as they arrive; the receiver ends
/// when the connection does.
type Listening = (Client, mpsc::UnboundedReceiver<Notification>);

/// Makes connections for listening, with the configuration and TLS of the pool's.
#[derive(Clone)]
pub(crate) struct Listener(
    Arc<dyn Fn() -> BoxFuture<'static, Result<Listening, StoreError>> + Send + Sync>,
);

impl Listener {
    pub(crate) fn new<T>(config: tokio_postgres::Config, tls: T) -> Self
    where
        T: MakeTlsConnect<Socket> + Clone + Send + Sync + 'static,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        Self(Arc::new(move || {
            let (config, tls) = (config.clone(), tls.clone());
            Box::pin(async move {
                let (client, mut connection) = config
                    .connect(tls)
                    .await
                    .map_err(StoreError::from_tokio_postgres)?;
                let (sender, receiver) = mpsc::unbounded_channel();
                // Polling the connection also carries the client's own statements.
                tokio::spawn(async move {
                    while let Some(message) =
                        std::future::poll_fn(|cx| connection.poll_message(cx)).await
                    {
                        match message {
                            Ok(AsyncMessage::Notification(note)) => {
                                if sender.send(note).is_err() {
                                    return;
                                }
                            }
                            Ok(_) => {}
                            Err(_) => return,
                        }
                    }
                });
                Ok((client, receiver))
            })
        }))
    }

    /// A connection listening on `channel`.
    async fn connect(&self, channel: &str) -> Result<Listening, StoreError> {
        let (client, receiver) = (self.0)().await?;
        let quoted = channel.replace('"', "\"\"");
        client
            .batch_execute(&format!("LISTEN \"{quoted}\""))
            .await
            .map_err(StoreError::from_tokio_postgres)?;
        Ok((client, receiver))
    }

    /// Listens on `channel` and wakes one of `wake`'s waiters for each notification whose
    /// payload `wanted` accepts, until the subscription is dropped or every holder of `wake`
    /// is gone. A lost connection is made again a second later; the waiters poll meanwhile.
    pub(crate) async fn listen(
        &self,
        channel: String,
        wake: Arc<Notify>,
        wanted: impl Fn(&str) -> bool + Send + Sync + 'static,
        what: &'static str,
    ) -> Result<Subscription, StoreError> {
        let first = self.connect(&channel).await?;
        let weak = Arc::downgrade(&wake);
        drop(wake);
        let listener = self.clone();
        let task = tokio::spawn(async move {
            let mut listening = Some(first);
            loop {
                if weak.strong_count() == 0 {
                    return;
                }
                let (client, mut notes) = match listening.take() {
                    Some(held) => held,
                    None => match listener.connect(&channel).await {
                        Ok(held) => {
                            // What was notified while the connection was down is lost: one
                            // waiter looks now rather than at its next poll.
                            if let Some(notify) = weak.upgrade() {
                                notify.notify_one();
                            }
                            held
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, listener = what, "listener cannot connect");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            continue;
                        }
                    },
                };
                while let Some(note) = notes.recv().await {
                    if wanted(note.payload()) {
                        match weak.upgrade() {
                            Some(notify) => notify.notify_one(),
                            None => return,
                        }
                    }
                }
                drop(client);
                tracing::warn!(listener = what, "listener lost its connection");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Ok(Subscription::new(task))
    }
}
