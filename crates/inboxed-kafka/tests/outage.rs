//! A downstream service down for two minutes in the middle of a one-partition topic, at the
//! library's defaults, the ladder included (`inboxed_test::outage::in_order_outage`): Kafka is in
//! order, so the record at the head is retried in place and the kill switch (which counts
//! distinct messages) stays closed; the ladder's waits (1 s, 10 s, 1 min, 5 min) keep its fifth
//! attempt past the outage, a probe a minute (charged nothing) finds the downstream back, and
//! afterwards every record is applied once with nothing dead-lettered.

use std::time::Duration;

use inboxed_kafka::{KafkaConfig, KafkaSource};
use inboxed_test::outage::{clean_stream, in_order_outage};
use inboxed_test::{Backend, Pg};

use crate::common::{brokers, publish, topic};

const MESSAGES: i64 = 80;

#[tokio::test]
async fn a_two_minute_downstream_outage_dead_letters_nothing() {
    let db = Pg::create().await;
    let topic = topic().await;
    publish(&topic, &clean_stream(MESSAGES)).await;
    let config = KafkaConfig::new(brokers(), format!("ledger-{topic}"), [topic.as_str()]);
    let src = KafkaSource::connect(config).await.unwrap();
    let outage = in_order_outage(&db, src, MESSAGES, Duration::from_secs(120)).await;
    outage.assert_in_order_came_through(&db, MESSAGES).await;
    assert!(
        !outage.opened,
        "one message at a time never opens the switch"
    );
    db.finish().await;
}
