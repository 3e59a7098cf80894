//! The PostgreSQL backend, for several replicas sharing one catalog.
//!
//! The store interface is synchronous (callers run it on blocking threads, as
//! SQLite needs), so this backend owns a small tokio runtime that drives its
//! connections, and each call waits for its future on the caller's thread.
//! That keeps the pool's sockets and timers off the daemon's own runtime and
//! works from any thread, inside a runtime or not.

mod db;
pub(super) mod lease;
mod migrate;

use std::future::Future;
use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, RecyclingMethod, Runtime};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use super::{Fence, StoreError};

/// How long a call waits for a free connection, or for a new one.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

pub(super) struct PgPool {
    /// Always `Some` until drop, which hands it to `shutdown_background` (a
    /// runtime must not be dropped where blocking is not allowed).
    rt: Option<tokio::runtime::Runtime>,
    /// The runtime's handle, for waiting on its futures (see [`block_on`]).
    handle: tokio::runtime::Handle,
    pool: deadpool_postgres::Pool,
    /// For the connections duties hold outside the pool.
    config: tokio_postgres::Config,
    /// The server as shown in errors and logs: host, port and database,
    /// never the password.
    pub(super) shown: String,
    /// This replica's id, written on the sync runs it starts.
    pub(super) replica: String,
}

/// `postgres://user@host:port/db` of a parsed config, without its password.
pub(super) fn shown(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or(""),
        config.get_dbname().unwrap_or("")
    )
}

/// Parses a `postgres://` URL (or key=value string); the error never
/// repeats the URL, which may hold a password.
pub(super) fn parse_url(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    url.parse::<tokio_postgres::Config>()
        .map_err(|e| StoreError::Postgres {
            at: "the configured store URL".to_owned(),
            message: format!("not a valid PostgreSQL URL: {e}"),
        })
}

impl PgPool {
    /// Connects (checking that the server answers), and brings the schema up
    /// to date.
    pub(super) fn open(url: &str, max_size: usize, replica: &str) -> Result<Self, StoreError> {
        let mut config = parse_url(url)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("gpuplan");
        let shown = shown(&config);
        let failed = |message: String| StoreError::Postgres {
            at: shown.clone(),
            message,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gpuplan-postgres")
            .enable_all()
            .build()
            .map_err(|e| failed(format!("cannot start its runtime: {e}")))?;
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            // A connection the server closed (a restart, an idle timeout)
            // is seen closed and replaced; a test query at every checkout
            // would add a round trip to each request the daemon answers.
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(max_size.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| failed(e.to_string()))?;
        let me = Self {
            handle: rt.handle().clone(),
            rt: Some(rt),
            pool,
            config,
            shown,
            replica: replica.to_owned(),
        };
        let mut conn = me.connection()?;
        migrate::run(&me, &mut conn)?;
        Ok(me)
    }

    pub(super) fn block<F: Future>(&self, f: F) -> F::Output {
        block_on(&self.handle, f)
    }

    pub(super) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }

    pub(super) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// A pooled connection, or why there is none.
    fn pooled(&self) -> Result<Object, String> {
        self.block(self.pool.get())
            .map_err(|e| format!("no connection: {e}"))
    }

    pub(super) fn connection(&self) -> Result<Object, StoreError> {
        self.pooled().map_err(|message| self.unreachable(&message))
    }

    /// A handle for one call; a connection that cannot be had makes each of
    /// its methods fail with the reason.
    pub(super) fn store(&self, fence: Option<Fence>) -> PgStore<'_> {
        PgStore {
            pool: self,
            conn: self.pooled(),
            fence,
        }
    }

    /// Prepares `sql` (once per connection) and runs it on `client`.
    fn query(
        &self,
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, StoreError> {
        self.block(async {
            let stmt = client.prepare_cached(sql).await?;
            client.query(&stmt, params).await
        })
        .map_err(|e| self.error(&e))
    }

    /// As [`PgPool::query`], for a statement's row count.
    fn execute(
        &self,
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, StoreError> {
        self.block(async {
            let stmt = client.prepare_cached(sql).await?;
            client.execute(&stmt, params).await
        })
        .map_err(|e| self.error(&e))
    }

    /// The error of a call that had no connection.
    fn unreachable(&self, message: &str) -> StoreError {
        StoreError::Postgres {
            at: self.shown.clone(),
            message: message.to_owned(),
        }
    }

    pub(super) fn error(&self, e: &tokio_postgres::Error) -> StoreError {
        StoreError::Postgres {
            at: self.shown.clone(),
            message: describe(e),
        }
    }
}

impl Drop for PgPool {
    fn drop(&mut self) {
        self.pool.close();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// What went wrong: the server's SQLSTATE code and message, else the
/// client's error.
pub(super) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}

/// Waits for `f` on this thread, with `handle`'s runtime current: that
/// runtime drives the sockets and timers `f` waits on, so this works from
/// any thread, inside another runtime or not.
///
/// Unconstrained by tokio's budget: on a task of another runtime (the CLI
/// calls the store on its own), once the task's budget is spent the pool's
/// semaphore answers "not yet" until the task yields, which it cannot
/// while this thread waits here: a prune of many batches spun forever.
pub(super) fn block_on<F: Future>(handle: &tokio::runtime::Handle, f: F) -> F::Output {
    let _entered = handle.enter();
    futures_executor::block_on(tokio::task::unconstrained(f))
}

/// The store on one pooled connection.
pub(super) struct PgStore<'a> {
    pool: &'a PgPool,
    /// The connection, or why there is none.
    conn: Result<Object, String>,
    /// The lease of the duty this handle writes for, if any.
    fence: Option<Fence>,
}

impl PgStore<'_> {
    fn client(&mut self) -> Result<&mut Object, StoreError> {
        let pool = self.pool;
        self.conn
            .as_mut()
            .map_err(|message| pool.unreachable(message))
    }

    fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        match &self.conn {
            Ok(client) => self.pool.query(client, sql, params),
            Err(message) => Err(self.pool.unreachable(message)),
        }
    }

    fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        match &self.conn {
            Ok(client) => self.pool.execute(client, sql, params),
            Err(message) => Err(self.pool.unreachable(message)),
        }
    }

    /// Runs `f` in one transaction on this connection, committed when it
    /// returns `Ok` and rolled back otherwise.
    fn transaction<T>(
        &mut self,
        f: impl FnOnce(&mut PgTx<'_, '_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let pool = self.pool;
        let client = self.client()?;
        let tx = pool
            .block(client.transaction())
            .map_err(|e| pool.error(&e))?;
        let mut wrapped = PgTx { pool, tx };
        let out = f(&mut wrapped)?;
        pool.block(wrapped.tx.commit())
            .map_err(|e| pool.error(&e))?;
        Ok(out)
    }
}

/// An open transaction (rolled back when dropped uncommitted).
pub(super) struct PgTx<'p, 'c> {
    pool: &'p PgPool,
    tx: deadpool_postgres::Transaction<'c>,
}

impl PgTx<'_, '_> {
    /// Fails with `Fenced` unless `fence` is still the duty's current lease.
    /// The lease row stays share-locked until this transaction ends, so a
    /// takeover (which bumps the epoch) waits for this write or is seen by it.
    fn check_fence(&self, fence: Option<&Fence>) -> Result<(), StoreError> {
        let Some(fence) = fence else {
            return Ok(());
        };
        let current = current_epoch(&self.query(
            "SELECT epoch FROM leases WHERE duty = $1 FOR SHARE",
            &[&fence.duty],
        )?)?;
        if current == fence.epoch {
            Ok(())
        } else {
            Err(fenced(fence, current))
        }
    }

    fn query(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.pool.query(&self.tx, sql, params)
    }

    fn execute(&self, sql: &str, params: Params<'_>) -> Result<u64, StoreError> {
        self.pool.execute(&self.tx, sql, params)
    }
}

/// The epoch of a `SELECT epoch FROM leases` answer; 0 when there is no row.
fn current_epoch(rows: &[Row]) -> Result<i64, StoreError> {
    rows.first().map_or(Ok(0), |r| get(r, 0))
}

fn fenced(fence: &Fence, current: i64) -> StoreError {
    StoreError::Fenced {
        duty: fence.duty.clone(),
        held: fence.epoch,
        current,
    }
}

/// Reads column `i` of `row`, as a `StoreError` naming the column when its
/// type is not what this build expects.
pub(super) fn get<'r, T: tokio_postgres::types::FromSql<'r>>(
    row: &'r Row,
    i: usize,
) -> Result<T, StoreError> {
    row.try_get(i).map_err(|e| {
        let name = row.columns().get(i).map_or("?", |c| c.name());
        StoreError::Corrupt(format!("column {name}: {e}"))
    })
}

#[cfg(test)]
mod tests;
