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
