//! Wake-ups between nodes over UDP, for the databases that cannot notify (SQLite, MySQL/MariaDB):
//! a task enqueued through node A is seen by an idle claimer on node B at once instead of at
//! B's next poll (200 ms by default; issue 24).
//!
//! Each node binds a UDP socket ([`EngineConfig::peer_wake`](crate::EngineConfig)) and puts
//! its address and a random key (new at each start) in its node registry row (`info.wake`,
//! `info.wake_key`). Every heartbeat re-reads the registry: the live nodes (a heartbeat within
//! three periods, not stopped) with an address are this node's peers. When tasks become
//! available on this node (enqueue, retry, promote…) it sends each peer one datagram
//! `docket-wake 1 <their key> <queue>`; a peer that gets one with its own key wakes one claimer
//! of the queue, as a local insert does.
//!
//! A wake-up only makes a claimer look: the claim is the same transaction as always, so a
//! datagram lost, late, duplicated or forged cannot lose a task or run one twice. A node that
//! is unreachable, or started less than a heartbeat ago (its peers do not know it yet), finds
//! its tasks by polling, as without this. The key is not a secret (`GET /v1/nodes` shows it);
//! it keeps wake-ups meant for an earlier run of a node, or for another cluster, from counting.

use docket_core::api::NodeRecord;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UdpSocket;

/// Datagrams this node sent (`result="sent"`) or could not send (`"failed"`).
pub const PEER_WAKES_SENT: &str = "docket_peer_wakes_sent_total";
/// Datagrams this node received: `result="woke"` (a claimer was woken) or `"refused"` (not
/// docket's, or not for this run of this node).
pub const PEER_WAKES_RECEIVED: &str = "docket_peer_wakes_received_total";

const PREFIX: &str = "docket-wake 1 ";

/// This node's socket, key and peers.
#[derive(Debug)]
pub struct PeerWake {
    socket: Arc<UdpSocket>,
    key: String,
    advertise: SocketAddr,
    peers: Mutex<Vec<(SocketAddr, String)>>,
}

impl PeerWake {
    /// Binds `bind` and starts receiving until `cancel`, calling `wake` with the queue of each
    /// wake-up for this node (the engine wakes one claimer of it on this node only);
    /// `advertise` is the address peers send to (None: the bound one).
    ///
    /// # Errors
    /// The address cannot be bound.
    pub async fn start(
        bind: SocketAddr,
        advertise: Option<SocketAddr>,
        wake: impl Fn(&str) + Send + Sync + 'static,
        cancel: tokio_util::sync::CancellationToken,
    ) -> std::io::Result<(Arc<PeerWake>, tokio::task::JoinHandle<()>)> {
        let socket = Arc::new(UdpSocket::bind(bind).await?);
        let local = socket.local_addr()?;
        let me = Arc::new(PeerWake {
            socket: socket.clone(),
            key: uuid::Uuid::new_v4().simple().to_string(),
            advertise: advertise.unwrap_or(local),
            peers: Mutex::default(),
        });
        let key = me.key.clone();
        let h = tokio::spawn(async move {
            // A queue name is at most 256 characters, up to 1,024 bytes: a datagram fits.
            let mut buf = vec![0u8; 2048];
            loop {
                let got = tokio::select! {
                    _ = cancel.cancelled() => return,
                    r = socket.recv_from(&mut buf) => r,
                };
                match got {
                    Ok((n, _from)) => match queue_of(&buf[..n], &key) {
                        Some(queue) => {
                            ::metrics::counter!(PEER_WAKES_RECEIVED, "result" => "woke")
                                .increment(1);
                            wake(queue);
                        }
                        None => {
                            ::metrics::counter!(PEER_WAKES_RECEIVED, "result" => "refused")
                                .increment(1);
                        }
                    },
                    // Never fatal: polling still finds every task.
                    Err(e) => {
                        tracing::warn!(error = %e, "peer wake socket failed; retrying in 100 ms");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        Ok((me, h))
    }

    /// The address and key this node publishes in its registry row.
    pub fn info(&self) -> serde_json::Value {
        serde_json::json!({"wake": self.advertise.to_string(), "wake_key": self.key})
    }

    /// Takes the peers from the registry: live nodes other than `me` that publish an address.
    pub fn set_peers(
        &self,
        nodes: &[NodeRecord],
        me: &str,
        now: docket_core::Timestamp,
        heartbeat: Duration,
    ) {
        let live_since = docket_core::time::sub(now, heartbeat.saturating_mul(3));
        let peers = nodes
            .iter()
            .filter(|n| n.name != me && n.stopped_at.is_none() && n.heartbeat_at >= live_since)
            .filter_map(|n| {
                let addr = n.info.get("wake")?.as_str()?.parse().ok()?;
                let key = n.info.get("wake_key")?.as_str()?.to_string();
                // Not this node's own address (two rows of one node after a rename).
                (key != self.key).then_some((addr, key))
            })
            .collect();
        if let Ok(mut p) = self.peers.lock() {
            *p = peers;
        }
    }

    /// Tells every peer that tasks became available on `queue`. Never waits: a datagram the
    /// socket cannot take now is dropped (the peer polls).
    pub fn send(&self, queue: &str) {
        let peers = self.peers.lock().map(|p| p.clone()).unwrap_or_default();
        for (addr, key) in peers {
            let msg = format!("{PREFIX}{key} {queue}");
            let result = match self.socket.try_send_to(msg.as_bytes(), addr) {
                Ok(_) => "sent",
                Err(_) => "failed",
            };
            ::metrics::counter!(PEER_WAKES_SENT, "result" => result).increment(1);
        }
    }
}

/// The queue a datagram wakes, when it is a wake-up for the run of this node keyed `key`.
fn queue_of<'a>(datagram: &'a [u8], key: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(datagram).ok()?;
    let rest = text.strip_prefix(PREFIX)?;
    let (k, queue) = rest.split_once(' ')?;
    (k == key && !queue.is_empty()).then_some(queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_wake_ups_for_this_run_are_taken() {
        let key = "k1";
        assert_eq!(queue_of(b"docket-wake 1 k1 emails", key), Some("emails"));
        assert_eq!(queue_of(b"docket-wake 1 k1 a b", key), Some("a b"));
        assert_eq!(queue_of(b"docket-wake 1 k2 emails", key), None);
        assert_eq!(queue_of(b"docket-wake 1 k1 ", key), None);
        assert_eq!(queue_of(b"docket-wake 2 k1 emails", key), None);
        assert_eq!(queue_of(b"\xff\xfe", key), None);
        assert_eq!(queue_of(b"", key), None);
    }
}
