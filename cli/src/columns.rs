//! Plain-text tables as the tools skiff's admin commands imitate print
//! them (crictl's `images`, kubeadm's `token list`): one layout, so the
//! commands' tables cannot drift apart.

/// `rows` (the header first) as lines of cells, each column as wide as its
/// widest cell and three spaces from the next, with no trailing spaces.
pub(crate) fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell_without_trailing_spaces() {
        let rows = [
            ["NAME".to_string(), "SIZE".into()],
            ["a-long-name".into(), "1".into()],
            ["b".into(), "".into()],
        ];
        assert_eq!(columns(&rows), "NAME          SIZE\na-long-name   1\nb\n");
    }
}
