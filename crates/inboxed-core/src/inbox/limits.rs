//! A worker's rate limits ([`RateLimit`](crate::RateLimit)): how many rows a claim may take
//! under the overall limit, and the claimed rows handed back for their bucket's.

use tracing::warn;

use super::store::{ClaimToken, InboxRow, InboxStore};
use super::worker::Worker;
use crate::handler::Handler;
use crate::metrics as m;

/// How many rows a claim may take under the overall rate limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Permits {
    /// Permits taken for this many rows.
    Taken(usize),
    /// None taken yet: one row, whose permit is taken once it is claimed.
    AfterClaim,
}

impl<S: InboxStore, H: Handler<S::Db>> Worker<S, H> {
    /// Hands back each row over its bucket's rate limit, its attempt given back and claimable
    /// again at its slot ([`RateLimit`](crate::RateLimit)); returns the others and how many
    /// were handed back. A row that could not be handed back runs with the others, over its
    /// limit: better than leaving it claimed until its lease runs out.
    pub(super) async fn defer_over_limit(
        &self,
        rows: Vec<InboxRow>,
        token: &ClaimToken,
    ) -> (Vec<InboxRow>, u64) {
        let inner = &*self.inner;
        let limit = &inner.config.rate_limit;
        if !limit.limits_buckets() {
            return (rows, 0);
        }
        let mut within = Vec::with_capacity(rows.len());
        let mut deferred = 0;
        for row in rows {
            let Err(wait) = limit.check_bucket(&row.envelope, true) else {
                within.push(row);
                continue;
            };
            match inner.store.release(token, &[row.id], wait).await {
                Ok(_) => deferred += 1,
                Err(e) => {
                    warn!(error = %e, row = row.id, "could not hand back a row over its rate limit; running it");
                    within.push(row);
                }
            }
        }
        if deferred > 0 {
            metrics::counter!(m::RATE_LIMITED_TOTAL, "consumer" => inner.consumer.as_str().to_owned(), "action" => "deferred")
                .increment(deferred);
        }
        (within, deferred)
    }
}
