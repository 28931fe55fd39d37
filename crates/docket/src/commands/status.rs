//! `docket status`: the cluster at a glance.

use super::output::print_table;
use anyhow::Result;
use docket_client::Client;

pub(crate) async fn status(c: Client, json: bool) -> Result<()> {
    let v = c.get_json("/v1/status", &[]).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let now = chrono::Utc::now();
    let age = |t: &serde_json::Value| -> String {
        t.as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|t| {
                let s = (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
                if s < 120 {
                    format!("{s}s")
                } else if s < 7200 {
                    format!("{}m", s / 60)
                } else {
                    format!("{}h", s / 3600)
                }
            })
            .unwrap_or_else(|| "-".into())
    };
    let states = [
        "scheduled",
        "available",
        "running",
        "retryable",
        "completed",
        "discarded",
        "cancelled",
    ];
    let mut headers = vec!["QUEUE", "STATE"];
    headers.extend(states.iter().map(|s| match *s {
        "scheduled" => "SCHED",
        "available" => "AVAIL",
        "running" => "RUN",
        "retryable" => "RETRY",
        "completed" => "DONE",
        "discarded" => "DISCARD",
        _ => "CANCEL",
    }));
    headers.push("OLDEST");
    let rows = v["queues"]
        .as_array()
        .map(|qs| {
            qs.iter()
                .map(|q| {
                    let mut r = vec![
                        q["name"].as_str().unwrap_or_default().to_string(),
                        if q["settings"]["paused"] == true {
                            "paused".into()
                        } else {
                            "active".into()
                        },
                    ];
                    r.extend(states.iter().map(|s| q["counts"][s].to_string()));
                    r.push(age(&q["oldest_available_at"]));
                    r
                })
                .collect()
        })
        .unwrap_or_default();
    print_table(&headers, rows);
    println!();
    let nodes: Vec<Vec<String>> = v["nodes"]
        .as_array()
        .map(|ns| {
            ns.iter()
                .map(|n| {
                    vec![
                        n["name"].as_str().unwrap_or_default().to_string(),
                        n["state"].as_str().unwrap_or("-").to_string(),
                        age(&n["heartbeat_at"]),
                        n["version"].as_str().unwrap_or_default().to_string(),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    print_table(&["NODE", "STATE", "HEARTBEAT", "VERSION"], nodes);
    println!();
    println!(
        "last hour: {} completed, {} failed   schedules: {} ({} paused)",
        v["last_hour"]["completed"],
        v["last_hour"]["failed"],
        v["schedules"]["total"],
        v["schedules"]["paused"]
    );
    Ok(())
}
