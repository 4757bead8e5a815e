//! What a store hands a worker for the length of its run: the listener that wakes it and the
//! session that says it is alive. Each is a task the guard ends when dropped.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// A running listener for database wake-ups of idle workers. Dropping it stops the listener.
#[derive(Debug)]
pub struct Subscription {
    task: tokio::task::JoinHandle<()>,
}

impl Subscription {
    /// Wraps the listener `task`, which calls `notify_one` on the workers' wake-up for each
    /// notification (one idle claim loop per stored row, not all of them).
    #[must_use]
    pub fn new(task: tokio::task::JoinHandle<()>) -> Self {
        Self { task }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Holds a worker's liveness registration (see [`InboxStore::hold_liveness`]). Dropped, it
/// ends the session and leaves the registration to the reaper, as a death would; released, it
/// removes the registration first, as a clean stop should.
///
/// [`InboxStore::hold_liveness`]: super::store::InboxStore::hold_liveness
#[derive(Debug)]
pub struct Liveness {
    task: tokio::task::JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    peers: Arc<AtomicU32>,
}

impl Liveness {
    /// Wraps the task that keeps the worker's session (and its lock) alive. When `stop` fires,
    /// the task removes the registration through that session and ends.
    #[must_use]
    pub fn new(task: tokio::task::JoinHandle<()>, stop: tokio::sync::oneshot::Sender<()>) -> Self {
        Self {
            task,
            stop: Some(stop),
            peers: Arc::default(),
        }
    }

    /// Where the task keeps the number of workers registered on the database (this one
    /// included; 0 until known), which paced workers share the server's loops by.
    #[must_use]
    pub fn with_peers(mut self, peers: Arc<AtomicU32>) -> Self {
        self.peers = peers;
        self
    }

    /// The workers registered on the database, this one included; 0 while not known.
    #[must_use]
    pub fn peers(&self) -> Arc<AtomicU32> {
        Arc::clone(&self.peers)
    }

    /// Removes the registration and ends the session, waiting at most `within`.
    pub async fn release(mut self, within: Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(within, &mut self.task).await;
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One claim loop's place at a store's batch gate (see [`InboxStore::batch_gate`]): a session
/// of its own, kept by a task, that holds one of the gate's slots while the loop runs a batch.
/// The task owns the session, so that a loop stopped while it waits for a slot leaves nothing
/// half-done: the task hands back a slot it got for a loop that no longer waits. Dropped, it
/// lets the task end, which closes the session, and with it frees any slot held.
///
/// [`InboxStore::batch_gate`]: super::store::InboxStore::batch_gate
#[derive(Debug)]
pub struct Gate {
    requests: tokio::sync::mpsc::UnboundedSender<GateRequest>,
    /// Not aborted on drop: the task ends when the requests stop, after closing its session.
    _task: tokio::task::JoinHandle<()>,
}

/// What a loop asks of its gate's task.
#[derive(Debug)]
pub enum GateRequest {
    /// A slot, answered with its number, or `None` when the gate cannot be reached (the loop
    /// then runs its batch ungated: the gate paces, it never holds work back).
    Enter(tokio::sync::oneshot::Sender<Option<u32>>),
    /// The slot is free again.
    Leave(u32),
}

impl Gate {
    /// Wraps the `task` that serves `requests`.
    #[must_use]
    pub fn new(
        task: tokio::task::JoinHandle<()>,
        requests: tokio::sync::mpsc::UnboundedSender<GateRequest>,
    ) -> Self {
        Self {
            requests,
            _task: task,
        }
    }

    /// Waits for a slot; `None` when the gate cannot be reached.
    pub async fn enter(&self) -> Option<u32> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.requests.send(GateRequest::Enter(reply)).ok()?;
        answer.await.ok().flatten()
    }

    /// Frees `slot`, without waiting for the server.
    pub fn leave(&self, slot: u32) {
        let _ = self.requests.send(GateRequest::Leave(slot));
    }
}
