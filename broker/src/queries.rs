//! Statements put together from named query files. A claim has three variants — in the queue's
//! order (`queries/claim.sql`), by fair tag (`claim_fair.sql`), from a cursor
//! (`claim_from.sql`) — which differ only in how they choose their candidates: each file says
//! that, and takes the start every claim has (`claim_room_and_acks.sql`: the budget's room, the
//! riding acks) and the end (`claim_answer.sql`: the lease written and the rows answered) by a
//! line `-- @include NAME.sql`, put in here once, when a statement is first asked for.

use std::sync::LazyLock;

/// The files a statement may include, by name.
const PARTS: [(&str, &str); 2] = [
    (
        "claim_room_and_acks.sql",
        include_str!("../queries/claim_room_and_acks.sql"),
    ),
    (
        "claim_answer.sql",
        include_str!("../queries/claim_answer.sql"),
    ),
];

/// `text` with each `-- @include NAME.sql` line replaced by that file.
fn with_parts(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 4096);
    for line in text.lines() {
        match line.strip_prefix("-- @include ") {
            Some(name) => {
                let part = PARTS
                    .iter()
                    .find(|(n, _)| *n == name.trim())
                    .unwrap_or_else(|| panic!("no query part {name:?}"))
                    .1;
                out.push_str(part.trim_end());
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

static CLAIM: LazyLock<String> = LazyLock::new(|| with_parts(include_str!("../queries/claim.sql")));
static CLAIM_FAIR: LazyLock<String> =
    LazyLock::new(|| with_parts(include_str!("../queries/claim_fair.sql")));
static CLAIM_FROM: LazyLock<String> =
    LazyLock::new(|| with_parts(include_str!("../queries/claim_from.sql")));

/// The claim in the queue's order.
pub fn claim() -> &'static str {
    &CLAIM
}

/// The claim of a fair queue.
pub fn claim_fair() -> &'static str {
    &CLAIM_FAIR
}

/// The claim from a cursor.
pub fn claim_from() -> &'static str {
    &CLAIM_FROM
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_claim_is_its_own_candidates_between_the_shared_start_and_answer() {
        for (name, sql) in [
            ("claim", claim()),
            ("claim_fair", claim_fair()),
            ("claim_from", claim_from()),
        ] {
            assert!(!sql.lines().any(|l| l.starts_with("-- @include")), "{name}");
            assert_eq!(
                sql.matches("WITH room AS MATERIALIZED").count(),
                1,
                "{name}"
            );
            assert_eq!(sql.matches(", candidates AS").count(), 1, "{name}");
            assert_eq!(sql.matches(", leased AS (").count(), 1, "{name}");
            let (start, answer) = (
                sql.find("WITH room").unwrap(),
                sql.find(", leased AS (").unwrap(),
            );
            assert!(
                start < sql.find(", candidates AS").unwrap()
                    && sql.find(", candidates AS").unwrap() < answer,
                "{name}"
            );
        }
        // pg_stat_statements and the benches tell the variants apart by their first line.
        assert!(claim().starts_with("-- Delete the completed jobs"));
        assert!(claim_fair().starts_with("-- The claim of a fair queue"));
        assert!(claim_from().starts_with("-- claim.sql from a cursor"));
    }
}
