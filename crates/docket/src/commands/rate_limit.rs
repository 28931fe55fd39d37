//! `docket rate-limit …`.

use super::output::print_table;
use crate::cli::RateLimitCmd;
use anyhow::Result;
use docket_client::Client;
use docket_core::rate_limit::{Kind, RateLimit, RateLimitSpec};

fn table(all: &[RateLimit]) {
    let rows = all
        .iter()
        .map(|l| {
            vec![
                l.name.clone(),
                l.kind.as_str().to_string(),
                l.limit.to_string(),
                l.period
                    .map(docket_core::duration::format)
                    .unwrap_or_else(|| "-".into()),
                l.keys.to_string(),
                l.admitted.to_string(),
                l.delayed.to_string(),
                l.blocked.to_string(),
            ]
        })
        .collect();
    print_table(
        &[
            "NAME", "KIND", "LIMIT", "PERIOD", "KEYS", "ADMITTED", "DELAYED", "BLOCKED",
        ],
        rows,
    );
}

fn show(all: &[RateLimit], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(all)?);
    } else {
        table(all);
    }
    Ok(())
}

pub(crate) async fn rate_limit_cmd(c: Client, cmd: RateLimitCmd) -> Result<()> {
    match cmd {
        RateLimitCmd::Set {
            name,
            kind,
            limit,
            period,
            json,
        } => {
            let spec = RateLimitSpec {
                kind: Kind::parse(&kind).map_err(|e| anyhow::anyhow!(e))?,
                limit,
                period,
            };
            let l = c.rate_limit_put(&name, &spec).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&l)?);
                return Ok(());
            }
            table(&[l]);
            Ok(())
        }
        RateLimitCmd::List { json } => show(&c.rate_limit_list().await?, json),
        RateLimitCmd::Show { name, json } => {
            let l = c.rate_limit_get(&name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&l)?);
                return Ok(());
            }
            table(&[l]);
            Ok(())
        }
        RateLimitCmd::Delete { name } => {
            c.rate_limit_delete(&name).await?;
            println!("deleted rate limit {name}");
            Ok(())
        }
    }
}
