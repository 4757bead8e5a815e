//! How the screen reaches the server: plain TCP, or TLS when the URL says `tls://` or the
//! server's `INFO` requires it. A cluster's URL names several servers: each connection goes to
//! the first that answers, so that when the client's server goes away, its reconnection (to
//! the screen) reaches another.
//!
//! NATS upgrades to TLS after the server's first line (`INFO {...}`), so the screen reads that
//! line, does the handshake itself (checking the certificate against the configured roots and
//! the URL's host name), and hands async-nats the plaintext with an `INFO` that no longer asks
//! for TLS. async-nats then talks plain NATS to the screen on the loopback interface, and the
//! screen still reads every message the server sends: TLS does not take the screen away.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use inboxed_core::BoxError;

use crate::screen::{Dial, Io};

/// The longest `INFO` line read before the handshake; the server's is a few hundred bytes.
const MAX_INFO: usize = 64 * 1024;

/// How long one server of a cluster may take to answer before the next is tried: one cut off
/// from the network answers nothing.
const PER_SERVER: Duration = Duration::from_secs(5);

/// Where the screen connects, and how.
pub(crate) struct Upstream {
    /// Each server's `host:port`, and the name its certificate must carry (the URL's host).
    servers: Vec<(String, ServerName<'static>)>,
    /// TLS even if the server does not ask for it (`tls://`).
    tls_required: bool,
    connector: TlsConnector,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addrs: Vec<&str> = self.servers.iter().map(|(a, _)| a.as_str()).collect();
        f.debug_struct("Upstream")
            .field("servers", &addrs)
            .field("tls_required", &self.tls_required)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// The servers at `addrs` (`host:port` each, tried in this order), trusting the system's
    /// roots and the certificates of `ca_pem`.
    pub(crate) fn new(
        addrs: Vec<String>,
        tls_required: bool,
        ca_pem: Option<&str>,
    ) -> Result<Self, BoxError> {
        let mut servers = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let host = addr
                .rsplit_once(':')
                .map_or(addr.as_str(), |(host, _)| host)
                .trim_start_matches('[')
                .trim_end_matches(']');
            let name = ServerName::try_from(host.to_owned())
                .map_err(|e| format!("host {host:?} is no server name for TLS: {e}"))?;
            servers.push((addr, name));
        }
        let mut roots = RootCertStore::empty();
        // A system without a readable store still reaches servers of the configured CA.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(pem) = ca_pem {
            let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the TLS CA file does not parse: {e}"))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err("the TLS CA file holds no usable certificate".into());
            }
        }
        let config = ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self {
            servers,
            tls_required,
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// Connects to one server, with TLS when the URL or the server asks for it.
    async fn dial_one(
        &self,
        addr: &str,
        name: &ServerName<'static>,
    ) -> io::Result<(Box<dyn Io>, Vec<u8>)> {
        let mut tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let line = read_info(&mut tcp).await?;
        let mut info = parse_info(&line)?;
        let server_wants = info
            .get("tls_required")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        if !(server_wants || self.tls_required) {
            return Ok((Box::new(tcp), line));
        }
        let tls = self
            .connector
            .connect(name.clone(), tcp)
            .await
            .map_err(|e| {
                io::Error::new(e.kind(), format!("TLS with the NATS server at {addr}: {e}"))
            })?;
        if let Some(fields) = info.as_object_mut() {
            for field in ["tls_required", "tls_verify", "tls_available"] {
                fields.remove(field);
            }
        }
        let mut rewritten = b"INFO ".to_vec();
        serde_json::to_writer(&mut rewritten, &info).map_err(io::Error::other)?;
        rewritten.extend_from_slice(b"\r\n");
        Ok((Box::new(tls), rewritten))
    }
}

impl Dial for Upstream {
    /// Connects to the first server that answers, each tried for [`PER_SERVER`] at most.
    /// Returns the stream and the `INFO` line to give async-nats (rewritten to say no TLS when
    /// the screen did it); the last server's error when none answers.
    async fn dial(&self) -> io::Result<(Box<dyn Io>, Vec<u8>)> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the URL names no server");
        for (addr, name) in &self.servers {
            match tokio::time::timeout(PER_SERVER, self.dial_one(addr, name)).await {
                Ok(Ok(dialed)) => return Ok(dialed),
                Ok(Err(e)) => last = e,
                Err(_) => {
                    last = io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the NATS server at {addr} did not answer in {PER_SERVER:?}"),
                    );
                }
            }
        }
        Err(last)
    }
}

/// The server's first line, `INFO {...}\r\n`, read before anything else is sent.
async fn read_info(tcp: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(1024);
    let mut byte = [0; 1];
    // Byte by byte: with TLS, what follows the line is the handshake, not the client's to read.
    while !line.ends_with(b"\r\n") {
        if line.len() >= MAX_INFO {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the NATS server's INFO line exceeds 64 KiB",
            ));
        }
        if tcp.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the NATS server closed the connection before its INFO line",
            ));
        }
        line.push(byte[0]);
    }
    Ok(line)
}

fn parse_info(line: &[u8]) -> io::Result<serde_json::Value> {
    let json = line
        .strip_prefix(b"INFO")
        .map(<[u8]>::trim_ascii)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the server's first line is no NATS INFO: {}",
                    inboxed_core::escape_bytes(&line[..line.len().min(80)])
                ),
            )
        })?;
    serde_json::from_slice(json).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the NATS server's INFO does not parse: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn info_lines_parse_or_are_named() {
        let info = parse_info(b"INFO {\"tls_required\":true,\"max_payload\":1048576}\r\n").unwrap();
        assert_eq!(info["tls_required"], true);
        let err = parse_info(b"-ERR 'nope'\r\n").unwrap_err().to_string();
        assert!(err.contains("no NATS INFO"), "{err}");
    }

    #[test]
    fn the_host_name_is_checked_as_given() {
        assert!(Upstream::new(vec!["localhost:4222".into()], true, None).is_ok());
        assert!(
            Upstream::new(
                vec!["127.0.0.1:4222".into(), "localhost:4223".into()],
                true,
                None
            )
            .is_ok()
        );
        let err =
            Upstream::new(vec!["localhost:4222".into()], true, Some("no pem here")).unwrap_err();
        assert!(err.to_string().contains("no usable certificate"), "{err}");
    }
}
