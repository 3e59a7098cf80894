//! How far a fetch has got, for a terminal's progress line: the bytes and
//! answers [`crate::http::HttpClient`] (and the AWS SDK's pages) read, and
//! what a sync made of them.
//!
//! The counters belong to the future a sync runs ([`counting`]): every
//! adapter's requests count into them without a handle threaded through ten
//! adapters, and work outside such a future counts nothing. Adapters that
//! spawn tasks would lose them; none does (Alibaba's concurrent pages are
//! polled in the fetch's own task).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Counters {
    /// Body bytes read, retries included.
    pub bytes: AtomicU64,
    /// Answers read whole (pages, files).
    pub answers: AtomicU64,
    /// Prices and spot observations the provider answered, once fetched.
    pub records: AtomicU64,
    /// Rows the adapter left out as unusable (a snapshot's `skipped`).
    pub rejected: AtomicU64,
}

impl Counters {
    #[must_use]
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

tokio::task_local! {
    static COUNTERS: Arc<Counters>;
}

/// Runs `work` counting into `counters`.
pub async fn counting<F: Future>(counters: Arc<Counters>, work: F) -> F::Output {
    COUNTERS.scope(counters, work).await
}

fn with(f: impl FnOnce(&Counters)) {
    let _ = COUNTERS.try_with(|c| f(c));
}

pub(crate) fn read(bytes: usize) {
    with(|c| {
        c.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    });
}

pub(crate) fn answered() {
    with(|c| {
        c.answers.fetch_add(1, Ordering::Relaxed);
    });
}

/// What a fetch brought: `records` usable, `rejected` left out.
pub fn fetched(records: usize, rejected: u64) {
    with(|c| {
        c.records.store(records as u64, Ordering::Relaxed);
        c.rejected.store(rejected, Ordering::Relaxed);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_work_inside_counting_is_counted() {
        read(10);
        let counters = Arc::new(Counters::default());
        counting(counters.clone(), async {
            read(100);
            read(23);
            answered();
            fetched(7, 2);
        })
        .await;
        read(1000);
        assert_eq!(Counters::get(&counters.bytes), 123);
        assert_eq!(Counters::get(&counters.answers), 1);
        assert_eq!(Counters::get(&counters.records), 7);
        assert_eq!(Counters::get(&counters.rejected), 2);
    }
}
