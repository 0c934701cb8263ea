//! The releases recorded in the repository's `RELEASES` file: each version and the full hash of
//! the commit it was cut from. Tags do not travel with every clone; this file does, so whatever
//! builds a previous release (the rolling-upgrade run) takes its commit from here.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

/// One release: its version and the commit it was cut from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub version: String,
    pub commit: String,
}

/// `(major, minor, patch)` of `X.Y.Z`, or `None`.
pub fn version_parts(version: &str) -> Option<(u32, u32, u32)> {
    let mut parts = version.split('.').map(|p| {
        (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .then(|| p.parse().ok())
            .flatten()
    });
    let parsed = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(parsed)
}

/// The releases of `RELEASES`'s text, oldest first: `VERSION COMMIT` a line, `#` comments and
/// blank lines ignored. A line that is not one, a short hash or versions out of order are named.
pub fn parse(text: &str) -> Result<Vec<Release>, String> {
    let mut releases: Vec<Release> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [version, commit] = fields[..] else {
            return Err(format!(
                "RELEASES line {}: {line:?} is not `VERSION COMMIT`",
                n + 1
            ));
        };
        let Some(parts) = version_parts(version) else {
            return Err(format!(
                "RELEASES line {}: {version:?} is not a version X.Y.Z",
                n + 1
            ));
        };
        if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "RELEASES line {}: {commit:?} is not a full commit hash (40 hex digits; `git rev-parse` gives it)",
                n + 1
            ));
        }
        if let Some(last) = releases.last() {
            if version_parts(&last.version).is_some_and(|l| l >= parts) {
                return Err(format!(
                    "RELEASES line {}: {version} after {}: oldest first, each version once",
                    n + 1,
                    last.version
                ));
            }
        }
        releases.push(Release {
            version: version.to_string(),
            commit: commit.to_ascii_lowercase(),
        });
    }
    Ok(releases)
}

/// The releases recorded in `ROOT/RELEASES`.
pub fn read(root: &Path) -> anyhow::Result<Vec<Release>> {
    let path = root.join("RELEASES");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    parse(&text).map_err(anyhow::Error::msg)
}

/// The release `version` names, or the newest one.
pub fn pick<'a>(releases: &'a [Release], version: Option<&str>) -> anyhow::Result<&'a Release> {
    match version {
        None => releases
            .last()
            .context("RELEASES names no release: add `VERSION COMMIT` when one is cut"),
        Some(v) => match releases.iter().find(|r| r.version == v) {
            Some(r) => Ok(r),
            None => bail!(
                "RELEASES names no release {v} (it has {})",
                releases
                    .iter()
                    .map(|r| r.version.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

/// `git show COMMIT:PATH` in `root`.
pub fn file_at(root: &Path, commit: &str, path: &str) -> anyhow::Result<String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["show", &format!("{commit}:{path}")])
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git show {commit}:{path}: {} (a shallow clone lacks older commits: `git fetch --unshallow`)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `[package]` version of a Cargo.toml's text.
pub fn cargo_version(toml: &str) -> Option<&str> {
    let mut in_package = false;
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some(v) = line
                .strip_prefix("version")
                .map(str::trim_start)
                .and_then(|l| l.strip_prefix('='))
            {
                return Some(v.trim().trim_matches('"'));
            }
        }
    }
    None
}

/// The newest migration (`broker/migrations/NNNN_name.sql`) at `commit`: its schema.
pub fn schema_at(root: &Path, commit: &str) -> anyhow::Result<i32> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["ls-tree", "--name-only", commit, "broker/migrations/"])
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git ls-tree {commit}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|f| f.rsplit('/').next()?.get(..4)?.parse::<i32>().ok())
        .max()
        .with_context(|| format!("no migrations at {commit}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "019efd30214c8e1496226fb2c48ff718cf43e17c";
    const B: &str = "0948071040bea941c2029baa71aeacc90cb7264b";

    #[test]
    fn releases_are_read_oldest_first_and_a_line_that_is_not_one_is_named() {
        let text = format!("# comment\n\n0.1.0 {A}\n  0.2.0 {}  \n", B.to_uppercase());
        let releases = parse(&text).unwrap();
        assert_eq!(releases.len(), 2);
        assert_eq!(releases[1].commit, B);
        assert_eq!(pick(&releases, None).unwrap().version, "0.2.0");
        assert_eq!(pick(&releases, Some("0.1.0")).unwrap().commit, A);
        assert!(pick(&releases, Some("0.3.0"))
            .unwrap_err()
            .to_string()
            .contains("no release 0.3.0 (it has 0.1.0, 0.2.0)"));
        for (bad, says) in [
            (format!("0.1.0 {A} extra"), "line 1"),
            ("0.1.0 019efd3".to_string(), "not a full commit hash"),
            (format!("v0.1.0 {A}"), "not a version X.Y.Z"),
            (format!("0.1 {A}"), "not a version X.Y.Z"),
            (format!("0.2.0 {B}\n0.1.0 {A}"), "line 2: 0.1.0 after 0.2.0"),
            (format!("0.2.0 {B}\n0.2.0 {A}"), "each version once"),
        ] {
            let e = parse(&bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        assert!(pick(&[], None).is_err());
    }

    #[test]
    fn a_cargo_toml_says_its_package_version() {
        let toml = "[workspace]\nversion = \"9\"\n[package]\nname = \"drover-cli\"\nversion = \"0.2.0\"\n[dependencies]\nversion = \"1\"\n";
        assert_eq!(cargo_version(toml), Some("0.2.0"));
        assert_eq!(cargo_version("[dependencies]\nversion = \"1\""), None);
    }

    /// Each recorded release is a commit of this repository whose Cargo.toml and Drover\Version
    /// say its version, with the schema CHANGELOG.md names for it ("## X.Y.Z — schema N").
    #[test]
    fn every_recorded_release_is_a_commit_here_with_its_version_and_schema() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let releases = read(root).unwrap();
        assert!(
            releases.iter().any(|r| r.version == "0.2.0"),
            "{releases:?}"
        );
        let changelog = std::fs::read_to_string(root.join("CHANGELOG.md")).unwrap();
        for r in &releases {
            let toml = file_at(root, &r.commit, "Cargo.toml").unwrap();
            assert_eq!(cargo_version(&toml), Some(r.version.as_str()), "{r:?}");
            let php = file_at(root, &r.commit, "php-client/src/Version.php").unwrap();
            assert!(
                php.contains(&format!("PACKAGE = '{}'", r.version)),
                "{r:?}: Drover\\Version::PACKAGE"
            );
            let heading = format!("## {} — schema ", r.version);
            let said: i32 = changelog
                .lines()
                .find_map(|l| l.strip_prefix(&heading))
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("CHANGELOG.md has no {heading:?}N heading"));
            assert_eq!(schema_at(root, &r.commit).unwrap(), said, "{r:?}");
        }
    }
}
