//! etcd as a register: clients on every member put, get and
//! compare-and-set a few keys through etcd's v3 JSON gateway while the
//! members are partitioned and their links lose packets; every operation
//! is recorded with `cx.history()`, and the history must be linearizable.
//! etcd serves reads by quorum (`serializable` off), so a member cut off
//! from the majority answers nothing rather than something stale.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value as Json};
use testkit::history::{Check, History, Op};
use testkit::prelude::*;
use testkit::{Link, Partition};

/// The registers: keys are checked apart, each its own linearization, so
/// more keys keep each key's search small.
const KEYS: [&str; 8] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"];
/// The pause between one client's operations: a client at full speed
/// makes thousands of operations per key, more than a linearizability
/// search can settle within its bound once a partition leaves some of
/// them indeterminate.
const PACE: Duration = Duration::from_millis(100);
/// Clients, each bound to one member (client `c` to member `c % 3`).
const CLIENTS: u32 = 6;
/// How long one request may take: a member without a leader never
/// answers, and its client records the operation as unknown.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// How long each fault is held while the clients run.
const HELD: Duration = Duration::from_secs(10);

testkit::main!();

/// One member's JSON gateway, as one client talks to it.
#[derive(Clone)]
struct Member {
    client: testkit::pod::Client,
    base: String,
}

/// What one request's answer says about its operation.
enum Answer {
    /// The member answered, with its JSON.
    Said(Json),
    /// The member refused it before doing anything (a 4xx).
    Refused,
    /// Nobody knows: a timeout, a dropped connection, a 5xx.
    Unknown,
}

impl Member {
    async fn post(&self, path: &str, body: Json) -> Answer {
        let sent = self
            .client
            .post(format!("{}{path}", self.base))
            .timeout(REQUEST_TIMEOUT)
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => match r.json::<Json>().await {
                Ok(v) => Answer::Said(v),
                Err(_) => Answer::Unknown,
            },
            Ok(r) if r.status().is_client_error() => Answer::Refused,
            _ => Answer::Unknown,
        }
    }

    /// `put key value`.
    async fn put(&self, key: &str, value: i64) -> Answer {
        let body = json!({ "key": B64.encode(key), "value": B64.encode(value.to_string()) });
        self.post("/v3/kv/put", body).await
    }

    /// `get key`: its value, `None` when unset.
    async fn get(&self, key: &str) -> Result<Option<i64>, Answer> {
        match self
            .post("/v3/kv/range", json!({ "key": B64.encode(key) }))
            .await
        {
            Answer::Said(v) => match v["kvs"].as_array().and_then(|kvs| kvs.first()) {
                None => Ok(None),
                Some(kv) => decode(&kv["value"]).map(Some).ok_or(Answer::Unknown),
            },
            other => Err(other),
        }
    }

    /// `if key == from then key := to`: whether it swapped.
    async fn cas(&self, key: &str, from: i64, to: i64) -> Result<bool, Answer> {
        let key = B64.encode(key);
        let body = json!({
            "compare": [{ "key": key, "target": "VALUE", "result": "EQUAL",
                          "value": B64.encode(from.to_string()) }],
            "success": [{ "request_put": { "key": key, "value": B64.encode(to.to_string()) } }],
        });
        match self.post("/v3/kv/txn", body).await {
            // An answer without `succeeded` is etcd's false.
            Answer::Said(v) => Ok(v["succeeded"].as_bool().unwrap_or(false)),
            other => Err(other),
        }
    }
}

/// A value as the gateway carries it: base64 of its decimal text.
fn decode(v: &Json) -> Option<i64> {
    let bytes = B64.decode(v.as_str()?).ok()?;
    std::str::from_utf8(&bytes).ok()?.parse().ok()
}

/// Client `id`'s loop until `stop`: a read, a write of a value no one else
/// writes, or a compare-and-set from the value it last read, in turn over
/// the keys.
async fn client(id: u32, member: Member, history: History, stop: Arc<AtomicBool>) {
    let mut last_read: Option<i64> = None;
    let mut i: u32 = 0;
    while !stop.load(Ordering::SeqCst) {
        tokio::time::sleep(PACE).await;
        i += 1;
        let key = KEYS[((id + i) as usize) % KEYS.len()];
        let fresh = i64::from(id) * 1_000_000 + i64::from(i);
        match i % 3 {
            0 => {
                let op = history.invoke(id, Op::read(key));
                match member.get(key).await {
                    Ok(Some(v)) => {
                        last_read = Some(v);
                        op.ok(v)
                    }
                    Ok(None) => op.ok(()),
                    // A read that got no answer changed nothing.
                    Err(_) => op.fail(),
                }
            }
            1 => {
                let op = history.invoke(id, Op::write(key, fresh));
                match member.put(key, fresh).await {
                    Answer::Said(_) => op.ok(()),
                    Answer::Refused => op.fail(),
                    Answer::Unknown => op.info(),
                }
            }
            _ => {
                let from = last_read.unwrap_or(0);
                let op = history.invoke(id, Op::cas(key, from, fresh));
                match member.cas(key, from, fresh).await {
                    Ok(swapped) => op.ok(swapped),
                    Err(Answer::Refused) => op.fail(),
                    Err(_) => op.info(),
                }
            }
        }
    }
}

/// Six clients, two on each member, under a partition that leaves one
/// member alone (its clients' requests go unanswered, the majority goes
/// on), then a loss of 30% between the other two and of 10% on every
/// packet of the third; then the faults healed and the clients run on a
/// moment. Every get, put and compare-and-set recorded: the history must
/// be linearizable, key by key.
#[testkit::test(exclusive, timeout = "3m")]
async fn a_register_stays_linearizable_under_a_partition_and_lossy_links(
    cx: &mut Cx,
) -> testkit::Result {
    let pod = cx.pod()?;
    let members: Vec<String> = pod.nodes().into_iter().map(str::to_owned).collect();
    ensure!(members.len() == 3, "three members, not {members:?}");
    let member = |name: &str| -> testkit::Result<Member> {
        let node = pod.node(name)?;
        Ok(Member {
            client: node.client(),
            base: node.base_url().trim_end_matches('/').to_owned(),
        })
    };
    let history = cx.history();
    // Every key set before the faults, so each register starts known.
    let first = member(&members[0])?;
    for (n, key) in KEYS.iter().enumerate() {
        let op = history.invoke(0, Op::write(*key, n as i64 + 1));
        match first.put(key, n as i64 + 1).await {
            Answer::Said(_) => op.ok(()),
            _ => bail!("the first put of {key} was not answered: is the cluster up?"),
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = tokio::task::JoinSet::new();
    for id in 0..CLIENTS {
        let m = member(&members[id as usize % members.len()])?;
        clients.spawn(client(id, m, history.clone(), Arc::clone(&stop)));
    }
    let alone = members[0].clone();
    cx.log(format!("partition: {alone} alone, the others a majority"));
    cx.faults()
        .partition(Partition::Minority {
            nodes: vec![alone.clone()],
        })
        .await?;
    tokio::time::sleep(HELD).await;
    cx.faults().heal().await?;
    cx.faults()
        .degrade_link(&members[1], &members[2], Link::loss(0.3))
        .await?;
    cx.faults().degrade(&members[0], Link::loss(0.1)).await?;
    tokio::time::sleep(HELD).await;
    cx.faults().heal().await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    while let Some(done) = clients.join_next().await {
        done?;
    }
    let checked = history.check(Check::register()).await?;
    cx.log(checked);
    Ok(())
}
