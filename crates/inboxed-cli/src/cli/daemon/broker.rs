//! Whether a broker is reachable, for `/health`: a TCP connection to one of the addresses its
//! URL names opens within a deadline. The daemon's own connection may be mid-reconnect, and an
//! idle relay exchanges nothing with its broker, so the probe does not ask them; what a
//! connection that opens but is refused at the protocol level means (a password revoked, a
//! queue deleted) the daemon's own loops log and retry.

use std::time::Duration;

use tokio::net::TcpStream;

use crate::cli::database::redact;

/// A broker's addresses, from its URL.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    shown: String,
    addresses: Vec<String>,
}

impl Broker {
    /// The addresses `url` names (`scheme://[user@]host[:port][,host[:port]…][/…]`), each
    /// with its scheme's default port; `None` for a URL without a host (`sqs://`: the AWS
    /// endpoint of the region, which the SDK resolves).
    pub(crate) fn from_url(url: &str) -> Option<Self> {
        let (scheme, rest) = url.split_once("://")?;
        let default_port = match scheme {
            "amqp" => 5672,
            "amqps" => 5671,
            "nats" | "tls" => 4222,
            "redis" | "rediss" => 6379,
            "kafka" => 9092,
            "sqs+https" => 443,
            "sqs+http" => 80,
            _ => return None,
        };
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        let hosts = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        let addresses: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(|h| with_port(h, default_port))
            .collect();
        (!addresses.is_empty()).then(|| Self {
            shown: redact(url),
            addresses,
        })
    }

    /// Ok when a connection to any of its addresses opens within `deadline`; else why not.
    pub(crate) async fn reachable(&self, deadline: Duration) -> Result<(), String> {
        let mut why = Vec::new();
        for address in &self.addresses {
            match tokio::time::timeout(deadline, TcpStream::connect(address.as_str())).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) => why.push(format!("{address}: {e}")),
                Err(_) => why.push(format!("{address}: no answer within {deadline:?}")),
            }
        }
        Err(format!("unreachable ({}): {}", self.shown, why.join("; ")))
    }
}

/// `host` with `port` unless it names one (`[::1]:5672`, `localhost:5672`).
fn with_port(host: &str, port: u16) -> String {
    let has_port = match host.rsplit_once(':') {
        Some((before, after)) => {
            !after.is_empty()
                && after.bytes().all(|b| b.is_ascii_digit())
                && (!before.contains(':') || before.ends_with(']'))
        }
        None => false,
    };
    if has_port {
        host.to_owned()
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_come_from_the_url_with_each_schemes_port() {
        let of = |url: &str| Broker::from_url(url).map(|b| b.addresses);
        assert_eq!(
            of("amqp://guest:pw@rabbit/%2f"),
            Some(vec!["rabbit:5672".into()])
        );
        assert_eq!(
            of("amqps://u:p@[::1]:5999/vhost"),
            Some(vec!["[::1]:5999".into()])
        );
        assert_eq!(
            of("kafka://k1:19092,k2"),
            Some(vec!["k1:19092".into(), "k2:9092".into()])
        );
        assert_eq!(
            of("nats://n1:4223,n2:4224"),
            Some(vec!["n1:4223".into(), "n2:4224".into()])
        );
        assert_eq!(
            of("rediss://:pw@cache?x=1"),
            Some(vec!["cache:6379".into()])
        );
        assert_eq!(
            of("sqs+http://127.0.0.1:15000/q"),
            Some(vec!["127.0.0.1:15000".into()])
        );
        assert_eq!(of("[::1]"), None);
        assert_eq!(of("sqs://"), None);
    }

    #[test]
    fn what_it_shows_has_no_password() {
        let broker = Broker::from_url("amqp://guest:hunter2@127.0.0.1:1/%2f").unwrap();
        assert!(!format!("{broker:?}").contains("hunter2"), "{broker:?}");
    }
}
