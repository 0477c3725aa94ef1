//! Test support: a throwaway single-member etcd server (Debian's
//! `/usr/bin/etcd`, installed by `scripts/bootstrap`) on free loopback
//! ports with its data in a directory the caller owns, killed by its PID
//! when dropped, and waiting on a store's watch with a deadline. Used by
//! the store's conformance tests, the end-to-end tests and benchmarks;
//! never by the server itself.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The etcd binary: `SKIFF_ETCD_BIN`, else Debian's.
pub fn etcd_binary() -> PathBuf {
    std::env::var_os("SKIFF_ETCD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/etcd"))
}

/// Why a test etcd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(
        "no etcd at {0}: install Debian's etcd-server (scripts/bootstrap does) or set SKIFF_ETCD_BIN"
    )]
    Missing(PathBuf),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("etcd exited before it was ready ({status}); its log:\n{log}")]
    Exited { status: String, log: String },
    #[error("etcd did not become ready within {timeout:?}; its log:\n{log}")]
    NotReady { timeout: Duration, log: String },
}

/// Server-side TLS for a test etcd: its certificate and key, and the CA
/// its clients' certificates must chain to (client certificates are then
/// required).
#[derive(Debug, Clone)]
pub struct EtcdTls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A running test etcd.
#[derive(Debug)]
pub struct EtcdProcess {
    child: Child,
    endpoint: String,
    data_dir: PathBuf,
    log: PathBuf,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> Result<u16, HarnessError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("finding a free port"))
}

impl EtcdProcess {
    /// Starts a plain-HTTP etcd with its data under `dir` and waits until
    /// it reports itself healthy.
    pub fn start(dir: &Path) -> Result<Self, HarnessError> {
        Self::start_with(dir, None, &[])
    }

    /// Starts an etcd with optional TLS and extra flags. The ports are
    /// picked free just before etcd binds them, so a test running beside
    /// may take one first; then etcd is started again on other ports.
    pub fn start_with(
        dir: &Path,
        tls: Option<&EtcdTls>,
        extra: &[&str],
    ) -> Result<Self, HarnessError> {
        let mut attempt = 1;
        loop {
            match Self::start_once(dir, tls, extra) {
                Err(error)
                    if attempt < 3 && error.to_string().contains("address already in use") =>
                {
                    let _ = std::fs::remove_dir_all(dir.join("etcd-data"));
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once(dir: &Path, tls: Option<&EtcdTls>, extra: &[&str]) -> Result<Self, HarnessError> {
        let binary = etcd_binary();
        if !binary.exists() {
            return Err(HarnessError::Missing(binary));
        }
        let data_dir = dir.join("etcd-data");
        let log = dir.join("etcd.log");
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let scheme = if tls.is_some() { "https" } else { "http" };
        let endpoint = format!("{scheme}://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log_file = std::fs::File::create(&log).map_err(io("creating the etcd log"))?;
        let mut command = Command::new(&binary);
        command
            .arg("--name=test")
            .arg(format!("--data-dir={}", data_dir.display()))
            .arg(format!("--listen-client-urls={endpoint}"))
            .arg(format!("--advertise-client-urls={endpoint}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=test={peer}"))
            .arg("--initial-cluster-state=new")
            .arg("--logger=zap")
            .arg("--log-level=warn");
        if let Some(tls) = tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()))
                .arg(format!("--trusted-ca-file={}", tls.ca.display()))
                .arg("--client-cert-auth");
        }
        let child = command
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(io(format!("starting {}", binary.display())))?;
        let mut etcd = Self {
            child,
            endpoint,
            data_dir,
            log,
        };
        etcd.wait_ready(client_port, tls.is_some())?;
        Ok(etcd)
    }

    /// The client URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The member's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Bytes the member's data directory occupies on disk (allocated
    /// blocks, as `du` counts them, and as the sled store's stats do).
    pub fn disk_usage(&self) -> u64 {
        crate::sled_store::disk_usage(&self.data_dir)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What etcd logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self, port: u16, tls: bool) -> Result<(), HarnessError> {
        let timeout = Duration::from_secs(30);
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(HarnessError::Exited {
                    status: status.to_string(),
                    log: self.log(),
                });
            }
            // Over TLS the port accepting is as far as std can look; the
            // client's own connect retries until the member serves.
            let ready = if tls {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
            } else {
                healthy(port)
            };
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(HarnessError::NotReady {
                    timeout,
                    log: self.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether etcd's `/health` says so.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.contains("\"health\":\"true\"")
}

impl Drop for EtcdProcess {
    fn drop(&mut self) {
        // `Child::kill` signals this child's PID only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The next item of a watch; panics (failing the test) when none comes
/// within 10 s or the stream ends.
pub async fn next_event(
    stream: &mut crate::WatchStream,
) -> Result<crate::Event, crate::StoreError> {
    use futures::StreamExt;
    tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("watch event within 10 s")
        .expect("watch stream ended")
}

/// The next `n` events of a watch, all of which must be `Ok`.
pub async fn take_events(stream: &mut crate::WatchStream, n: usize) -> Vec<crate::Event> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(next_event(stream).await.expect("watch event"));
    }
    out
}
