//! A NATS JetStream cluster of three servers (`inboxed_test::nats::NatsCluster`) and a stream of
//! three replicas. The consumer is given the cluster's URL with the stream's leader first, so
//! it connects there; a quarter of the way through 4,000 messages that server is killed
//! (SIGKILL). The stream elects a new leader on the other two, the consumer reconnects to the
//! next server of its URL (through the screen, which stands for all three), the deliveries it
//! had not acked come back after their ack wait, and the ledger holds every message once.

use std::time::Duration;

use async_nats::jetstream;

use inboxed_core::KeySource;
use inboxed_nats::{NatsConfig, NatsSource};
use inboxed_test::nats::{NatsCluster, publish_restart_messages};
use inboxed_test::restart::audit_through;
use inboxed_test::{Backend, Pg};

#[tokio::test]
async fn a_cluster_losing_the_consumers_server_and_the_stream_leader_loses_and_repeats_nothing() {
    let db = Pg::create().await;
    let mut cluster = NatsCluster::start(3).await;
    let servers = cluster.url_from(0);
    let js = jetstream::new(
        async_nats::connect(servers.split(',').collect::<Vec<_>>())
            .await
            .unwrap(),
    );
    let mut stream = js
        .create_stream(jetstream::stream::Config {
            name: "CLUSTER".to_owned(),
            subjects: vec!["cluster.>".to_owned()],
            storage: jetstream::stream::StorageType::File,
            num_replicas: 3,
            ..jetstream::stream::Config::default()
        })
        .await
        .unwrap();
    publish_restart_messages(&js, "cluster.all", "c").await;
    let leader = stream
        .info()
        .await
        .unwrap()
        .cluster
        .clone()
        .and_then(|c| c.leader)
        .expect("the stream has a leader");
    let victim: usize = leader
        .strip_prefix("inboxed-")
        .and_then(|i| i.parse().ok())
        .expect("a server of the cluster leads the stream");
    drop(js);

    let config = NatsConfig::new(cluster.url_from(victim), "CLUSTER", "ledger")
        .prefetch(64)
        .ack_wait(Duration::from_secs(3))
        .key(KeySource::MessageIdProperty);
    let source = NatsSource::connect(config).await.unwrap();
    let (at_kill, ()) = audit_through(&db.locator, db.store.clone(), source, || async {
        cluster.servers[victim].kill().await;
    })
    .await;
    eprintln!(
        "NATS cluster: server {victim} (the consumer's, and the stream's leader) killed at \
         {at_kill} rows"
    );
    db.finish().await;
}
