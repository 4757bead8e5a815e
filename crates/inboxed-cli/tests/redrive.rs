//! `dead-letters retry --to-broker` end to end, through real RabbitMQ, NATS JetStream and
//! Redis Streams into a real PostgreSQL: a consumer whose handler is broken dead-letters a
//! message; a redelivery without the redrive mark leaves it dead; after the fix the binary
//! publishes the dead letter back, and the consumer applies it once and deletes the dead letter
//! in the same transaction.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use async_nats::jetstream;
use lapin::BasicProperties;
use lapin::options::BasicPublishOptions;
use redis::AsyncCommands;

use inboxed_core::{Consumer, ConsumerConfig, ConsumerName, DeliverySource, Processor};
use inboxed_test::handler::Script;
use inboxed_test::{Backend, Ledger, Pg, TestDb};

use crate::common;

use common::inboxed_with as run;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// The broken message: it fails permanently while the handler's switch is on.
fn payload() -> Vec<u8> {
    Script {
        amount: 7,
        fail_while_broken: true,
        ..Script::default()
    }
    .message("r-1")
    .payload()
    .to_vec()
}

async fn count(db: &TestDb<Pg>, sql: &'static str) -> i64 {
    db.scalar(sql).await
}

async fn wait_until(db: &TestDb<Pg>, sql: &'static str, want: i64, what: &str) {
    for _ in 0..300 {
        if count(db, sql).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what}: `{sql}` never reached {want}");
}

const LETTERS: &str = "SELECT count(*) FROM inboxed_dead_letters WHERE message_id = 'r-1'";
const LEDGER: &str = "SELECT coalesce(sum(amount), 0)::bigint FROM ledger";

/// Runs the scenario on `source`; `publish` sends the original message again (no redrive
/// mark); `to` are the flags naming the broker for the binary, and `nowhere` flags naming a
/// destination that does not exist, which must fail and publish nothing.
async fn scenario<S, F, Fut>(
    source: S,
    publish: F,
    to: &[&str],
    nowhere: &[&str],
    env: &[(&str, &str)],
) where
    S: DeliverySource + 'static,
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
    let db = Pg::create().await;
    let handler = Ledger::<Pg>::default();
    handler.broken.store(true, Ordering::SeqCst);
    let processor = Processor::new(
        db.store.clone(),
        ConsumerName::new("ledger").unwrap(),
        handler.clone(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consuming = tokio::spawn(async move {
        Consumer::new(processor, ConsumerConfig::default())
            .run(source, async {
                let _ = stopped.await;
            })
            .await
    });
    publish().await;
    wait_until(&db, LETTERS, 1, "the broken message is dead-lettered").await;
    // Redelivered without the mark: settled without the handler, still dead.
    publish().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        handler.calls(),
        1,
        "a plain redelivery never reaches the handler"
    );

    handler.broken.store(false, Ordering::SeqCst);
    let url = db.locator.as_str();
    let (_, listed) = run(
        env,
        &["dead-letters", "list", "--json", "--database-url", url],
    );
    let letter: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    let id = letter["id"].as_i64().unwrap().to_string();
    let retry = [
        &["dead-letters", "retry", &id, "--database-url", url][..],
        to,
    ]
    .concat();

    let (code, out) = run(env, &retry);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("would publish"), "{out}");
    // A dry run already refuses what the real run would.
    let unsupported = ["dead-letters", "retry", &id, "--database-url", url];
    let tls = [
        "--to-broker",
        "redis://127.0.0.1:6380",
        "--stream",
        "s",
        "--tls-ca-file",
        "ca.pem",
    ];
    let (code, out) = run(env, &[&unsupported[..], &tls].concat());
    assert_eq!(
        code, 2,
        "a CA file for a plain redis:// URL is refused: {out}"
    );
    assert!(out.contains("--tls-ca-file applies to"), "{out}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(count(&db, LETTERS).await, 1, "a dry run publishes nothing");
    assert_eq!(count(&db, LEDGER).await, 0);

    if !nowhere.is_empty() {
        let lost = [
            &["dead-letters", "retry", &id, "--database-url", url][..],
            nowhere,
        ]
        .concat();
        let (code, out) = run(env, &[&lost[..], &["--yes"]].concat());
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("not published"), "{out}");
        assert_eq!(count(&db, LETTERS).await, 1, "the dead letter stays");
    }

    let (code, out) = run(env, &[&retry[..], &["--yes"]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("marked as a redrive"), "{out}");
    wait_until(&db, LETTERS, 0, "the redrive deletes the dead letter").await;
    assert_eq!(count(&db, LEDGER).await, 7, "applied once");

    // The letter is gone: a second retry has nothing to send.
    let (code, out) = run(env, &[&retry[..], &["--yes"]].concat());
    assert_ne!(code, 0, "{out}");
    stop.send(()).unwrap();
    consuming.await.unwrap().unwrap();
    assert_eq!(count(&db, LEDGER).await, 7);
    assert_eq!(handler.calls(), 2);
    db.finish().await;
}

#[tokio::test]
async fn rabbitmq_redrive_is_applied_once() {
    let url = env_or("INBOXED_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f");
    let (channel, queue) = inboxed_test::amqp::queue(&url).await;
    let config = inboxed_rabbitmq::RabbitConfig::new(&url, &queue);
    let source = inboxed_rabbitmq::RabbitSource::connect(config)
        .await
        .unwrap();
    let publish = || publish_amqp(&channel, &queue);
    // A queue that does not exist returns the message instead of dropping it.
    let missing = ["--to-broker", &url, "--queue", "inboxed-no-such-queue"];
    scenario(
        source,
        publish,
        &["--to-broker", &url, "--queue", &queue],
        &missing,
        &[],
    )
    .await;
}

#[tokio::test]
async fn nats_redrive_is_applied_once() {
    let url = env_or("INBOXED_NATS_URL", "nats://127.0.0.1:4222");
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let name = format!("REDRIVE{}", uuid::Uuid::new_v4().simple());
    let subject = format!("{name}.orders");
    // A short duplicate window: the redrive reuses the original's Nats-Msg-Id.
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![subject.clone()],
        duplicate_window: Duration::from_secs(1),
        ..jetstream::stream::Config::default()
    })
    .await
    .unwrap();
    let config = inboxed_nats::NatsConfig::new(&url, &name, "ledger");
    let source = inboxed_nats::NatsSource::connect(config).await.unwrap();
    let publish = || async {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", "r-1");
        js.publish_with_headers(subject.clone(), headers, payload().into())
            .await
            .unwrap()
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1100)).await;
    };
    let unbound = ["--to-broker", &url, "--subject", "inboxed.no.stream"];
    scenario(
        source,
        publish,
        &["--to-broker", &url, "--subject", &subject],
        &unbound,
        &[],
    )
    .await;
    js.delete_stream(&name).await.unwrap();
}

#[tokio::test]
async fn redis_redrive_is_applied_once() {
    let url = env_or("INBOXED_REDIS_URL", "redis://127.0.0.1:6379");
    let stream = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    let client = redis::Client::open(url.as_str()).unwrap();
    let conn = client.get_multiplexed_async_connection().await.unwrap();
    let config = inboxed_redis::RedisConfig::new(&url, &stream, "ledger");
    let source = inboxed_redis::RedisSource::connect(config).await.unwrap();
    let publish = || {
        let mut conn = conn.clone();
        let stream = stream.clone();
        async move {
            let fields: [(&str, &[u8]); 2] = [("payload", &payload()), ("message_id", b"r-1")];
            let _: String = conn.xadd(&stream, "*", &fields).await.unwrap();
        }
    };
    // XADD NOMKSTREAM: a mistyped stream is refused, not created.
    let missing = ["--to-broker", &url, "--stream", "inboxed-no-such-stream"];
    scenario(
        source,
        publish,
        &["--to-broker", &url, "--stream", &stream],
        &missing,
        &[],
    )
    .await;
    let _: i64 = conn.clone().del(&stream).await.unwrap();
}

#[cfg(feature = "kafka")]
#[tokio::test]
async fn kafka_redrive_is_applied_once() {
    use inboxed_kafka::rdkafka::ClientConfig;
    use inboxed_kafka::rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use inboxed_kafka::rdkafka::client::DefaultClientContext;
    use inboxed_kafka::rdkafka::message::{Header, OwnedHeaders};
    use inboxed_kafka::rdkafka::producer::{FutureProducer, FutureRecord};

    let brokers = env_or("INBOXED_KAFKA_BROKERS", "127.0.0.1:19092");
    let topic = format!("inboxed-test-{}", uuid::Uuid::new_v4());
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    let options = AdminOptions::new().request_timeout(Some(Duration::from_secs(10)));
    let created = admin
        .create_topics(
            &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))],
            &options,
        )
        .await
        .expect("a Kafka-API broker must be running: scripts/test.sh starts one");
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let config = inboxed_kafka::KafkaConfig::new(&brokers, format!("ledger-{topic}"), [&topic])
        .commit_interval(Duration::from_millis(100));
    let source = inboxed_kafka::KafkaSource::connect(config).await.unwrap();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    let publish = || async {
        let headers = OwnedHeaders::new().insert(Header {
            key: "message_id",
            value: Some("r-1"),
        });
        let body = payload();
        let record: FutureRecord<'_, (), [u8]> =
            FutureRecord::to(&topic).payload(&body[..]).headers(headers);
        producer
            .send(record, Duration::from_secs(10))
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    };
    let url = format!("kafka://{brokers}");
    let missing = ["--to-broker", &url, "--topic", "inboxed-no-such-topic"];
    scenario(
        source,
        publish,
        &["--to-broker", &url, "--topic", &topic],
        &missing,
        &[],
    )
    .await;
}

#[cfg(feature = "sqs")]
#[tokio::test]
async fn sqs_redrive_is_applied_once() {
    use inboxed_sqs::aws_sdk_sqs::Client;
    use inboxed_sqs::aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
    use inboxed_sqs::aws_sdk_sqs::types::MessageAttributeValue;

    let endpoint = env_or("INBOXED_SQS_ENDPOINT", "http://127.0.0.1:15000");
    // The emulator takes any credentials; the binary reads them from the environment.
    let env = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
    ];
    let client = Client::from_conf(
        inboxed_sqs::aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(inboxed_sqs::https_client())
            .endpoint_url(&endpoint)
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "inboxed-test"))
            .build(),
    );
    let created = client
        .create_queue()
        .queue_name(format!("inboxed-test-{}", uuid::Uuid::new_v4()))
        .send()
        .await
        .expect("an SQS API must be running: scripts/test.sh starts one");
    let queue_url = created.queue_url.unwrap();
    let source = inboxed_sqs::SqsSource::with_client(
        client.clone(),
        inboxed_sqs::SqsConfig::new(&queue_url).wait(Duration::from_secs(1)),
    )
    .await
    .unwrap();
    let publish = || async {
        let id = MessageAttributeValue::builder()
            .data_type("String")
            .string_value("r-1")
            .build()
            .unwrap();
        client
            .send_message()
            .queue_url(&queue_url)
            .message_body(String::from_utf8(payload()).unwrap())
            .message_attributes("message_id", id)
            .send()
            .await
            .unwrap();
    };
    let url = format!("sqs+{queue_url}");
    let missing_url = format!("sqs+{endpoint}/123456789012/inboxed-no-such-queue");
    scenario(
        source,
        publish,
        &["--to-broker", &url],
        &["--to-broker", &missing_url],
        &env,
    )
    .await;
}

/// TLS with a private CA, for each broker that has it: the consumer and the binary's publisher
/// trust the test's CA (`tls_ca_file`, `--tls-ca-file`), and the redrive is applied once.
/// Publishes the scenario's message (key `r-1`) to `queue`, confirmed by the broker.
async fn publish_amqp(channel: &lapin::Channel, queue: &str) {
    let props = BasicProperties::default().with_message_id("r-1".into());
    channel
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            &payload(),
            props,
        )
        .await
        .unwrap();
}

#[path = "redrive/tls.rs"]
mod tls;
