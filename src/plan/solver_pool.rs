//! Where requested solves run: at most N at once, each on its own thread at a
//! lower CPU priority, away from the async runtime and the store's
//! connections. A solve can keep a core busy for minutes; beyond the cap a
//! request is refused at once (the caller answers 503) rather than queued, so
//! a burst of heavy plans cannot pile up behind each other or starve the
//! catalog queries.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::optimizer::{
    self, OptimizeError, PlanResult, Problem, Progress, ProgressSink, SolveOptions,
};

/// A plan solving now, as `GET /v1/solves` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RunningSolve {
    pub id: u64,
    pub name: String,
    pub elapsed_secs: f64,
    /// The search's last report (long risk plans report as they go).
    pub progress: Option<Progress>,
}

struct Entry {
    id: u64,
    name: String,
    started: Instant,
    progress: Option<Progress>,
    stop: Arc<AtomicBool>,
}

type Registry = Arc<Mutex<Vec<Entry>>>;

fn entries(registry: &Registry) -> MutexGuard<'_, Vec<Entry>> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes a solve off the registry when it ends, however it ends.
struct Listed {
    registry: Registry,
    id: u64,
}

impl Drop for Listed {
    fn drop(&mut self) {
        entries(&self.registry).retain(|e| e.id != self.id);
    }
}

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
    solves: Registry,
    next_id: AtomicU64,
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
            solves: Arc::new(Mutex::new(Vec::new())),
            next_id: AtomicU64::new(1),
        }
    }

    /// Solves that may run at once.
    #[must_use]
    pub fn max(&self) -> usize {
        self.max
    }

    /// Solves running now.
    #[must_use]
    pub fn running(&self) -> usize {
        self.max - self.slots.available_permits()
    }

    /// The plans solving now, oldest first, with their progress.
    #[must_use]
    pub fn running_solves(&self) -> Vec<RunningSolve> {
        entries(&self.solves)
            .iter()
            .map(|e| RunningSolve {
                id: e.id,
                name: e.name.clone(),
                elapsed_secs: e.started.elapsed().as_secs_f64(),
                progress: e.progress,
            })
            .collect()
    }

    /// Asks running solve `id` to stop with its best plan so far (a search
    /// that cannot, such as the extensive form's, runs on to its limit);
    /// false when no such solve is running.
    pub fn stop(&self, id: u64) -> bool {
        entries(&self.solves)
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.stop.store(true, Ordering::Relaxed))
            .is_some()
    }

    /// Solves `problem` listed among the running solves, its progress
    /// recorded there and passed on to the caller's sink.
    async fn solve_listed(
        &self,
        permit: OwnedSemaphorePermit,
        problem: Problem,
        mut opts: SolveOptions,
    ) -> Result<PlanResult, OptimizeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let stop = opts.stop.get_or_insert_with(Arc::default).clone();
        entries(&self.solves).push(Entry {
            id,
            name: problem.name.clone().unwrap_or_else(|| "plan".to_owned()),
            started: Instant::now(),
            progress: None,
            stop,
        });
        let listed = Listed {
            registry: self.solves.clone(),
            id,
        };
        let (registry, inner) = (self.solves.clone(), opts.progress.take());
        opts.progress = Some(ProgressSink(Arc::new(move |p: &Progress| {
            if let Some(e) = entries(&registry).iter_mut().find(|e| e.id == id) {
                e.progress = Some(*p);
            }
            if let Some(sink) = &inner {
                (sink.0)(p);
            }
        })));
        let solved = solve_plan(permit, problem, opts).await;
        drop(listed);
        solved
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
        Ok(self.solve_listed(permit, problem, opts).await)
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
            Ok(permit) => self.solve_listed(permit, problem, opts).await,
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

    #[tokio::test]
    async fn a_running_solve_is_listed_with_its_progress_and_can_be_stopped() {
        let doc = serde_json::json!({"schema_version": 3, "name": "two-classes",
            "classes": [{"id": "train", "demand": [2, 2], "perf": {"H100": 1}},
                        {"id": "infer", "demand": [1, 1], "perf": {"H100": 1, "L4": 0.25}}],
            "offers": [{"id": "h100", "cloud": "aws", "region": "r1", "instance_type": "h100",
                        "gpu_model": "H100", "gpus_per_instance": 1, "on_demand_price": 4.0,
                        "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": 2.0}]},
                       {"id": "l4", "cloud": "aws", "region": "r1", "instance_type": "l4",
                        "gpu_model": "L4", "gpus_per_instance": 1, "on_demand_price": 0.9,
                        "spot_price": 0.25}],
            "scenarios": [{"id": "calm", "probability": 0.75},
                          {"id": "storm", "probability": 0.25, "classes": {"infer": [2, 2]},
                           "spot_available": {"aws/r1/l4": 0}}]});
        let problem = Problem::from_json(&doc).unwrap();
        let pool = Arc::new(SolverPool::new(1));
        let seen: Arc<Mutex<Vec<RunningSolve>>> = Arc::default();
        let (watcher, log) = (pool.clone(), seen.clone());
        let opts = SolveOptions {
            progress: Some(ProgressSink(Arc::new(move |_| {
                let running = watcher.running_solves();
                for solve in &running {
                    assert!(watcher.stop(solve.id));
                }
                log.lock().unwrap().extend(running);
            }))),
            ..SolveOptions::default()
        };
        let solved = pool.solve(problem, opts).await.unwrap().unwrap();
        assert_eq!(
            (solved.status, solved.stopped_by),
            ("time_limit", Some("stopped"))
        );
        let seen = seen.lock().unwrap();
        assert_eq!(seen[0].name, "two-classes");
        assert!(seen[0].progress.is_some_and(|p| p.iteration == 1));
        // Gone from the list once it ended; an unknown id stops nothing.
        assert!(pool.running_solves().is_empty());
        assert!(!pool.stop(seen[0].id));
    }
}
