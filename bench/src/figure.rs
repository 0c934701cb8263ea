//! How the bench writes one figure in its text (the report, the groups' run lines): with fixed
//! digits, and a dash for a figure not measured (NaN).

/// `v` with `digits` decimals; "–" when it is NaN.
pub fn f(v: f64, digits: usize) -> String {
    if v.is_nan() {
        "–".into()
    } else {
        format!("{v:.digits$}")
    }
}

/// Thousands separated by commas.
pub fn int(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let s = format!("{:.0}", v);
    let (sign, digits) = s.strip_prefix('-').map(|d| ("-", d)).unwrap_or(("", &s));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}
