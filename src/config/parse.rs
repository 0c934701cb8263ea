//! Reading the versioned JSON file: the version first, then serde (unknown keys refused by name),
//! a parse error named by its key, then the checks of [`super::validate`].

use std::path::Path;

use super::{RunConfig, CONFIG_VERSION};
use crate::MasterError;

impl RunConfig {
    /// Reads and validates a config file: one of the master's user (or root) that no one else
    /// may write, never through a link (`state_dir::read_contract`).
    pub fn from_file(path: &Path) -> Result<RunConfig, MasterError> {
        let text = crate::state_dir::read_contract(path)?;
        Self::from_json(&text).map_err(|problems| MasterError::Config {
            source_name: path.display().to_string(),
            problems,
        })
    }

    /// Parses and validates; every problem is returned together.
    pub fn from_json(text: &str) -> Result<RunConfig, Vec<String>> {
        // Check the version first, so an old or new file gets that message, not a field error.
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            match v.get("version").and_then(|v| v.as_u64()) {
                Some(n) if n == CONFIG_VERSION as u64 => {}
                Some(n) => {
                    return Err(vec![format!(
                        "version {n} is not supported; this drover reads version {CONFIG_VERSION} (upgrade drover or the drover/laravel package so they match)"
                    )])
                }
                None => return Err(vec!["\"version\" is missing; expected 1".to_string()]),
            }
        }
        let config: RunConfig = serde_json::from_str(text).map_err(|e| {
            vec![match key_at(text, e.line(), e.column()) {
                Some(key) => format!("{key}: {e}"),
                None => e.to_string(),
            }]
        })?;
        config.validate()?;
        Ok(config)
    }
}

/// The key whose value a parse error stands at (serde_json's messages give only the line and
/// column): the error is reported right after a scalar value, or at the start of an array or
/// object, so the key is the string before the `:` before it. `None` elsewhere (an array's
/// element, an unknown key, which serde names itself).
fn key_at(text: &str, line: usize, column: usize) -> Option<String> {
    let b = text.as_bytes();
    let line_start = match line {
        0 | 1 => 0,
        n => text.match_indices('\n').nth(n - 2)?.0 + 1,
    };
    let mut i = (line_start + column).min(b.len());
    let skip_space = |i: &mut usize| {
        while *i > 0 && b[*i - 1].is_ascii_whitespace() {
            *i -= 1;
        }
    };
    // Where the string whose closing quote is at `end - 1` opens: the nearest unescaped quote.
    let string_start = |end: usize| -> Option<usize> {
        (0..end - 1).rev().find(|&j| {
            b[j] == b'"' && b[..j].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0
        })
    };
    skip_space(&mut i);
    if i > 0 && b[i - 1] == b'"' {
        i = string_start(i)?;
    } else {
        while i > 0 && (b[i - 1].is_ascii_alphanumeric() || b"+-.".contains(&b[i - 1])) {
            i -= 1;
        }
    }
    skip_space(&mut i);
    if i == 0 || b[i - 1] != b':' {
        return None;
    }
    i -= 1;
    skip_space(&mut i);
    if i == 0 || b[i - 1] != b'"' {
        return None;
    }
    serde_json::from_str(&text[string_start(i)?..i]).ok()
}
