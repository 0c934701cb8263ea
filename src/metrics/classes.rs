//! The job classes a master names in its metrics. A payload's `displayName` is the
//! application's, but a bug that puts an id in it must not grow the master without bound: the
//! first [`MAX_CLASSES`] classes a master sees are named, later ones are counted together as
//! [`OTHER_CLASSES`] — in `drover.metrics` and in the Prometheus series alike (a series, once
//! created, lives as long as the master, so the limit is for the master's life).

use std::collections::HashSet;

/// How many distinct classes a master names.
pub const MAX_CLASSES: usize = 500;
/// Where classes beyond [`MAX_CLASSES`] are counted.
pub const OTHER_CLASSES: &str = "(other)";

#[derive(Debug, Default)]
pub struct ClassGate {
    /// Classes named so far.
    named: HashSet<String>,
}

impl ClassGate {
    /// `class` if it is named (or there is room to name it), else [`OTHER_CLASSES`].
    pub fn admit(&mut self, class: String) -> String {
        if self.named.contains(&class) {
            return class;
        }
        if self.named.len() < MAX_CLASSES {
            self.named.insert(class.clone());
            return class;
        }
        OTHER_CLASSES.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_beyond_the_limit_are_counted_together_and_named_ones_stay_named() {
        let mut gate = ClassGate::default();
        for i in 0..MAX_CLASSES {
            assert_eq!(gate.admit(format!("Job{i}")), format!("Job{i}"));
        }
        assert_eq!(gate.admit("Late".into()), OTHER_CLASSES);
        assert_eq!(gate.admit("Job7".into()), "Job7");
    }
}
