//! A service's parts as tasks stopped together, for the deployment tests: store-then-process
//! (a relay storing a source into the inbox, workers writing each row on through the outbox, a
//! reaper, an outbox relay publishing) beside any other loop, all run until [`Parts::stop`].

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use inboxed_core::inbox::{
    Inbox, InboxRelay, InboxRelayConfig, Reaper, ReaperConfig, Worker, WorkerConfig,
};
use inboxed_core::outbox::{OutboxRelay, OutboxRelayConfig, Publisher};
use inboxed_core::{ConsumerName, DeliverySource};
use inboxed_postgres::PgStore;

use crate::chain::Forward;

/// Running tasks that stop together; each returns its error as text.
#[derive(Debug)]
pub struct Parts {
    stop: watch::Sender<bool>,
    tasks: JoinSet<Result<(), String>>,
}

impl Default for Parts {
    fn default() -> Self {
        Self {
            stop: watch::channel(false).0,
            tasks: JoinSet::new(),
        }
    }
}

impl Parts {
    /// A future that resolves when [`Parts::stop`] is called: a part's shutdown signal.
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stopped = self.stop.subscribe();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    }

    /// Runs `part` (built with a [`Parts::stopping`] of its own) until it ends.
    pub fn spawn<E: std::fmt::Display>(
        &mut self,
        part: impl Future<Output = Result<(), E>> + Send + 'static,
    ) {
        self.tasks
            .spawn(async move { part.await.map_err(|e| e.to_string()) });
    }

    /// Store-then-process at the defaults for `consumer` on `store`: a relay storing `source`,
    /// `workers` workers crediting the ledger and writing each row on to `next` through the
    /// outbox ([`Forward`]), a reaper, and an outbox relay publishing through `publisher`.
    pub fn store_then_process<Src, P>(
        &mut self,
        store: &PgStore,
        consumer: &ConsumerName,
        source: Src,
        workers: usize,
        next: &str,
        publisher: P,
    ) where
        Src: DeliverySource + 'static,
        P: Publisher + 'static,
    {
        let relay = InboxRelay::new(
            Inbox::new(store.clone(), consumer.clone()),
            InboxRelayConfig::default(),
        );
        let stopping = self.stopping();
        self.spawn(async move { relay.run(source, stopping).await });
        for _ in 0..workers {
            let handler = Forward::new(store, consumer, Some(next.to_owned()));
            let worker = Worker::new(
                store.clone(),
                consumer.clone(),
                handler,
                WorkerConfig::default(),
            );
            let stopping = self.stopping();
            self.spawn(async move { worker.run(stopping).await });
        }
        let reaper = Reaper::new(store.clone(), ReaperConfig::default());
        let stopping = self.stopping();
        self.spawn(async move {
            reaper.run(stopping).await;
            Ok::<(), String>(())
        });
        let outbox = OutboxRelay::new(store.clone(), publisher, OutboxRelayConfig::default());
        let stopping = self.stopping();
        self.spawn(async move { outbox.run(stopping).await });
    }

    /// Stops every part and waits for each.
    ///
    /// # Panics
    /// When a part does not stop within 60 s, or stopped with an error.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        while let Some(part) = tokio::time::timeout(Duration::from_secs(60), self.tasks.join_next())
            .await
            .expect("every part stops within 60 s of its shutdown")
        {
            part.expect("part task")
                .unwrap_or_else(|e| panic!("a part failed: {e}"));
        }
    }
}
