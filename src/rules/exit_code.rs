//! How `drover` exits when it fails: 78 when only an operator can make a start succeed, 1 for
//! the rest.
//!
//! Under `Restart=always` a master that failed starts again two seconds later. That helps when
//! the cause passes (a database restarting, a long transaction holding a migration's lock); it
//! does not when the start would be refused the same way every time — a configuration or
//! contract it cannot read, a user it may not run as, a schema that needs a newer drover (or an
//! older one that it may not migrate). Such a master exits with sysexits' `EX_CONFIG` (78), which
//! both units name in `RestartPreventExitStatus=`: systemd leaves it stopped, and the log's last
//! line says what to change (docs/deploy.md, docs/upgrading.md).

use std::error::Error;

use drover_broker::BrokerError;

use crate::MasterError;

/// `EX_CONFIG` (sysexits.h): refused for something only an operator can change.
pub const NEEDS_OPERATOR: u8 = 78;

/// Any other failure: a later start may succeed by itself.
pub const FAILED: u8 = 1;

/// The exit code for an error, from every error in its chain (an error given context keeps its
/// cause in the chain).
pub fn for_error<'a>(chain: impl IntoIterator<Item = &'a (dyn Error + 'static)>) -> u8 {
    let needs_operator = chain.into_iter().any(|e| {
        e.downcast_ref::<MasterError>()
            .is_some_and(MasterError::needs_operator)
            || e.downcast_ref::<BrokerError>()
                .is_some_and(BrokerError::needs_operator)
    });
    if needs_operator {
        NEEDS_OPERATOR
    } else {
        FAILED
    }
}

/// What is printed before the error when a master exits [`NEEDS_OPERATOR`]: the error, printed
/// after it, is the last line and names what to change.
pub fn needs_operator_line() -> String {
    format!(
        "drover: exit {NEEDS_OPERATOR} (EX_CONFIG): not restarted by drover's units (RestartPreventExitStatus={NEEDS_OPERATOR}): starting again unchanged would be refused the same way. Change what the next lines say, then start it again (systemctl start)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(e: &(dyn Error + 'static)) -> u8 {
        let chain = std::iter::successors(Some(e), |e: &&(dyn Error + 'static)| (*e).source());
        for_error(chain)
    }

    #[test]
    fn a_start_refused_for_what_only_an_operator_changes_exits_78() {
        let schema =
            BrokerError::Schema("drover's schema in this database is at version 99".into());
        assert_eq!(code(&schema), NEEDS_OPERATOR);
        assert_eq!(code(&MasterError::Broker(schema)), NEEDS_OPERATOR);
        let contract = MasterError::Config {
            source_name: "/srv/app/storage/drover/config.json".into(),
            problems: vec!["unknown key `fair`".into()],
        };
        assert_eq!(code(&contract), NEEDS_OPERATOR);
        let url = BrokerError::Config(vec!["the database URL has no host".into()]);
        assert_eq!(code(&MasterError::Broker(url)), NEEDS_OPERATOR);
    }

    #[test]
    fn anything_a_later_start_may_get_past_exits_1() {
        let locked = BrokerError::MigrationLocked {
            tries: 6,
            each: std::time::Duration::from_secs(5),
        };
        assert_eq!(code(&locked), FAILED);
        let timed_out = BrokerError::ConnectTimedOut {
            address: "db:5432/app".into(),
            seconds: 10,
        };
        assert_eq!(code(&MasterError::Broker(timed_out)), FAILED);
        let running = MasterError::AlreadyRunning {
            state_dir: "/srv/app/storage/drover".into(),
        };
        assert_eq!(code(&running), FAILED);
        let io = std::io::Error::other("disk full");
        assert_eq!(code(&io), FAILED);
    }

    #[test]
    fn the_cause_is_found_under_context() {
        #[derive(Debug, thiserror::Error)]
        #[error("starting the master")]
        struct Context(#[source] BrokerError);
        let wrapped = Context(BrokerError::Schema("needs a newer drover".into()));
        assert_eq!(code(&wrapped), NEEDS_OPERATOR);
    }
}
