//! Where requested solves run: at most N at once, each on its own thread at a
//! lower CPU priority, away from the async runtime and the store's
//! connections. A solve can keep a core busy for minutes; beyond the cap a
//! request is refused at once (the caller answers 503) rather than queued, so
//! a burst of heavy plans cannot pile up behind each other or starve the
//! catalog queries.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::optimizer::{self, OptimizeError, PlanResult, Problem, SolveOptions};

/// Every solve slot is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("all {max} solver slots are busy; try again shortly")]
pub struct Busy {
    pub max: usize,
}

pub struct SolverPool {
    slots: Arc<Semaphore>,
    max: usize,
    refused: AtomicU64,
}

impl SolverPool {
    /// A pool running at most `max` solves at once (at least one).
    #[must_use]
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
            refused: AtomicU64::new(0),
        }
    }

    /// Solves running now.
    #[must_use]
    pub fn running(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// Solves refused so far because every slot was busy.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// A slot: at once, or (with `wait`) once one is free.
    async fn slot(&self, wait: bool) -> Result<OwnedSemaphorePermit, Busy> {
        let taken = if wait {
            self.slots.clone().acquire_owned().await.ok()
        } else {
            self.slots.clone().try_acquire_owned().ok()
        };
        taken.ok_or_else(|| {
            self.refused.fetch_add(1, Ordering::Relaxed);
            Busy { max: self.max }
        })
    }

    /// Solves `problem` on a thread of its own when a slot is free.
    ///
    /// # Errors
    /// [`Busy`] when `max` solves are running already. The inner result is the
    /// optimizer's.
    pub async fn solve(
        &self,
        problem: Problem,
        opts: SolveOptions,
    ) -> Result<Result<PlanResult, OptimizeError>, Busy> {
        let permit = self.slot(false).await?;
        Ok(solve_plan(permit, problem, opts).await)
    }

    /// Solves `problem` once a slot is free, waiting for one (scheduled plans
    /// and the CLI, which have no one to tell "try again").
    ///
    /// # Errors
    /// The optimizer's.
    pub async fn solve_when_free(
        &self,
        problem: Problem,
        opts: SolveOptions,
    ) -> Result<PlanResult, OptimizeError> {
        match self.slot(true).await {
            Ok(permit) => solve_plan(permit, problem, opts).await,
            Err(_) => Err(OptimizeError::Solver(
                "the solver pool is closed".to_owned(),
            )),
        }
    }

    /// Runs `solve` (a job's solves, say) on a thread of its own, inside
    /// `span`: at once, or with `wait` once a slot is free.
    ///
    /// # Errors
    /// [`Busy`] when every slot is taken and `wait` is false. The inner error
    /// says the thread could not start or panicked.
    pub async fn call<T: Send + 'static>(
        &self,
        wait: bool,
        span: tracing::Span,
        solve: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Result<T, String>, Busy> {
        let permit = self.slot(wait).await?;
        Ok(run(permit, span, solve).await)
    }
}

async fn solve_plan(
    permit: OwnedSemaphorePermit,
    problem: Problem,
    opts: SolveOptions,
) -> Result<PlanResult, OptimizeError> {
    let span = tracing::info_span!(
        "solve",
        name = problem.name.as_deref().unwrap_or("-"),
        offers = problem.offers.len(),
        hours = problem.horizon()
    );
    run(permit, span, move || optimizer::solve(&problem, &opts))
        .await
        .unwrap_or_else(|e| Err(OptimizeError::Solver(e)))
}

/// Runs `solve` on a thread of its own at a lower priority, inside `span`,
/// holding `permit` until it ends.
async fn run<T: Send + 'static>(
    permit: OwnedSemaphorePermit,
    span: tracing::Span,
    solve: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("gpuplan-solve".to_owned())
        .spawn(move || {
            let _entered = span.enter();
            yield_to_queries();
            let result = solve();
            // Free the slot before answering, so a caller that got its
            // answer finds the slot free.
            drop(permit);
            let _ = tx.send(result);
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start a solver thread: {e}"));
    }
    // The sender is dropped without a value only when the solve panicked.
    rx.await
        .map_err(|_| "the solver panicked; see the daemon's log".to_owned())
}

/// How much lower than the daemon's other threads a solve runs: a solve keeps
/// a core busy for minutes, and queries and syncs must not wait for it.
const SOLVE_NICE: i32 = 10;

/// Lowers the calling thread's CPU priority. On Linux the nice value belongs
/// to the thread, so only this solve's thread is lowered. Failing leaves it as
/// it was, which is only slower for the queries.
fn yield_to_queries() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::nice(SOLVE_NICE) {
        tracing::debug!(error = %e, "Could not lower the solver thread's priority.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(hours: usize) -> Problem {
        Problem::from_json(&serde_json::json!({
            "demand": vec![4; hours],
            "offers": [{"id": "a", "cloud": "c", "region": "r", "instance_type": "t",
                        "gpu_model": "L4", "gpus_per_instance": 1, "on_demand_price": 1.0}]
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn solves_beyond_the_cap_are_refused_not_queued() {
        let pool = Arc::new(SolverPool::new(1));
        // Hold the only slot as a running solve would.
        let held = pool.slots.clone().try_acquire_owned().unwrap();
        let refused = pool.solve(problem(3), SolveOptions::default()).await;
        assert_eq!(refused.unwrap_err(), Busy { max: 1 });
        assert_eq!((pool.running(), pool.refused()), (1, 1));
        drop(held);
        let solved = pool
            .solve(problem(3), SolveOptions::default())
            .await
            .unwrap()
            .unwrap();
        assert!((solved.objective.unwrap() - 12.0).abs() < 1e-9);
        // The slot is free again once the solve ended.
        assert_eq!(pool.slots.available_permits(), 1);
    }
}
