//! Throwaway PostgreSQL databases for tests and benchmarks: one fresh
//! database per use on the server named by `GPUPLAN_TEST_PG_URL`, dropped when
//! done. `.ci/run` starts such a server; without the variable, PostgreSQL
//! tests are skipped, unless `GPUPLAN_TEST_PG_REQUIRED=1` makes that a failure.

use tokio_postgres::NoTls;

/// The server tests may create databases on (a URL of a superuser or a role
/// with CREATEDB, naming any existing database).
pub const SERVER_ENV: &str = "GPUPLAN_TEST_PG_URL";
/// Set to 1 where skipping PostgreSQL tests must fail instead (CI).
pub const REQUIRED_ENV: &str = "GPUPLAN_TEST_PG_REQUIRED";

pub struct ScratchDatabase {
    server: tokio_postgres::Config,
    name: String,
    url: String,
}

/// Runs `sql` on the server `config` names, on a thread of its own (callers
/// may be inside a runtime, where blocking on another is not allowed).
fn run_on(config: tokio_postgres::Config, sql: String) -> Result<(), String> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async move {
            let (client, conn) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
            let driver = tokio::spawn(conn);
            let out = client.batch_execute(&sql).await.map_err(|e| e.to_string());
            drop(client);
            let _ = driver.await;
            out
        })
    })
    .join()
    .map_err(|_| "the PostgreSQL helper thread panicked".to_owned())?
}

impl ScratchDatabase {
    /// A new empty database, or `None` when no server is configured (and
    /// none is required).
    ///
    /// # Panics
    /// When the server is configured but cannot create the database, or when
    /// none is configured but one is required.
    #[must_use]
    pub fn create() -> Option<Self> {
        let Ok(url) = std::env::var(SERVER_ENV) else {
            assert!(
                std::env::var(REQUIRED_ENV).as_deref() != Ok("1"),
                "{REQUIRED_ENV}=1 but {SERVER_ENV} is not set"
            );
            eprintln!("skipped: {SERVER_ENV} is not set");
            return None;
        };
        let server: tokio_postgres::Config = url.parse().expect("GPUPLAN_TEST_PG_URL");
        let name = format!(
            "gpuplan_test_{}_{:08x}",
            std::process::id(),
            fastrand::u32(..)
        );
        run_on(server.clone(), format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("cannot create a scratch database on {SERVER_ENV}: {e}"));
        let mut db = server.clone();
        db.dbname(&name);
        let url = to_url(&db);
        Some(Self { server, name, url })
    }

    /// The database's URL.
    #[must_use]
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A `postgres://` URL of `config` (the scratch server's own credentials).
fn to_url(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => {
            form_urlencoded::byte_serialize(p.display().to_string().as_bytes()).collect()
        }
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|p| format!(":{}", String::from_utf8_lossy(p)))
        .unwrap_or_default();
    format!(
        "postgres://{user}{password}@{host}:{port}/{}",
        config.get_dbname().unwrap_or("postgres")
    )
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        let _ = run_on(
            self.server.clone(),
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}
