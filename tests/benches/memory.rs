#![allow(clippy::expect_used, clippy::unwrap_used)]
//! Prints numbers; it asserts nothing. `memory_search` called through the tool (`DynTool::call_json`, argument
//! parsing and the JSON result included) over one owner's 100,000 entries in a SQLite file: latency p50/p99 per
//! kind of query. Target: p50 under 5 ms for word queries.
//!
//! Run: `cargo bench --offline -p minibot-e2e --bench memory`.

use minibot_agent::{DynTool, ToolContext, dyn_tool};
use minibot_kv_memory::{KvMemory, Limits, fold};
use minibot_tools::memory::{Memory, MemorySearch};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ENTRIES: usize = 100_000;
const VOCABULARY: u64 = 4_000;
const WORDS_PER_ENTRY: usize = 12;
const QUERIES: usize = 400;

/// A deterministic xorshift generator: the same file and queries on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn word(&mut self) -> String {
        word(self.next() % VOCABULARY)
    }
}

/// Five letters per word, so no word is a prefix of another and each matches only itself.
fn word(n: u64) -> String {
    let mut code = (n * 7_919 + 12_345) % 26u64.pow(5);
    (0..5)
        .map(|_| {
            let letter = char::from(b'a' + u8::try_from(code % 26).unwrap());
            code /= 26;
            letter
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

async fn fill(path: &std::path::Path, rng: &mut Rng) {
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display())).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    for i in 0..ENTRIES {
        let title = format!("Note {i} {} {}", rng.word(), rng.word());
        let data: Vec<String> = (0..WORDS_PER_ENTRY).map(|_| rng.word()).collect();
        let data = data.join(" ");
        let at = format!("2025-01-01 00:00:{:02}.{:06}", (i / 1_000_000) % 60, i % 1_000_000);
        sqlx::query(
            "INSERT INTO kv_memory (id, owner_id, title, data, metadata, source, created_at, updated_at, expires_at, \
             title_key, data_key) VALUES (?1, 'primary', ?2, ?3, '{\"category\": \"otros\"}', 'bench', ?4, ?4, NULL, \
             ?5, ?6)",
        )
        .bind(format!("{i:032x}"))
        .bind(&title)
        .bind(&data)
        .bind(&at)
        .bind(fold(&title))
        .bind(fold(&data))
        .execute(&mut *tx)
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    pool.close().await;
}

async fn measure(tool: &Arc<dyn DynTool>, ctx: &ToolContext, label: &str, queries: &[Option<String>]) {
    let mut times = Vec::with_capacity(queries.len());
    let mut matches = 0u64;
    for query in queries {
        let started = Instant::now();
        let result = tool.call_json(json!({ "query": query, "limit": 20 }), ctx).await.unwrap();
        times.push(started.elapsed());
        matches += result["total"].as_u64().unwrap();
    }
    times.sort();
    println!(
        "memory_search {label:<34} p50 {:>8.3} ms  p99 {:>8.3} ms  (mean total matches {})",
        percentile(&times, 0.50).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        matches / queries.len() as u64,
    );
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kv_memory.db");
    let limits = Limits { default_limit: 20, max_limit: 100 };
    let store = KvMemory::open(&path, 5, limits).await.unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    fill(&path, &mut rng).await;
    println!("filled {ENTRIES} entries in {:.1} s", started.elapsed().as_secs_f64());
    let tool = dyn_tool(MemorySearch::new(Arc::new(Memory::with_store(store))));
    let ctx = ToolContext { owner_id: "primary".into(), ..ToolContext::default() };

    // Warm the page cache and the prepared statements, as a running instance would have them.
    let warm: Vec<Option<String>> = (0..50).map(|_| Some(rng.word())).collect();
    measure(&tool, &ctx, "(warm-up)", &warm).await;

    let one: Vec<Option<String>> = (0..QUERIES).map(|_| Some(rng.word())).collect();
    let two: Vec<Option<String>> = (0..QUERIES).map(|_| Some(format!("{} {}", rng.word(), rng.word()))).collect();
    let prefix: Vec<Option<String>> = (0..QUERIES).map(|_| Some(rng.word()[..3].to_string())).collect();
    let fallback: Vec<Option<String>> = (0..QUERIES / 10).map(|_| Some(rng.word()[1..4].to_string())).collect();
    let none: Vec<Option<String>> = vec![None; QUERIES];
    measure(&tool, &ctx, "one word (~300 matches)", &one).await;
    measure(&tool, &ctx, "two words (AND, else OR)", &two).await;
    measure(&tool, &ctx, "3-letter prefix", &prefix).await;
    measure(&tool, &ctx, "no query (newest first)", &none).await;
    measure(&tool, &ctx, "mid-word text (substring scan)", &fallback).await;
}
