//! Text as the page carries it: escaped for HTML, and with what a browser
//! should not be sent raw made printable. The page and the trace view both
//! write through it.

/// Text for HTML: every character that could open markup is escaped, and
/// what a browser should not be sent raw is made printable ([`printable`]).
pub(super) fn esc(s: &str) -> String {
    let s = printable(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Whether `c` is a character the page must not carry as it is: a control
/// other than tab, newline and carriage return (NUL, BEL, ESC, DEL, the C1
/// range), or one of the non-characters U+FFFE and U+FFFF.
pub(super) fn unprintable(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
}

/// Whether `s` holds a character [`unprintable`] says no to, read as
/// bytes: most text holds none, and every page's text is asked.
pub(super) fn has_unprintable(s: &str) -> bool {
    let bytes = s.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| match b {
        0x00..=0x08 | 0x0b | 0x0c | 0x0e..=0x1f | 0x7f => true,
        // U+0080..U+009F, the C1 controls.
        0xc2 => matches!(bytes.get(i + 1), Some(0x80..=0x9f)),
        // U+FFFE and U+FFFF.
        0xef => bytes.get(i + 1) == Some(&0xbf) && matches!(bytes.get(i + 2), Some(0xbe | 0xbf)),
        _ => false,
    })
}

/// Text as the page shows it, whatever bytes a test wrote: ANSI escape
/// sequences (a coloured log) are dropped, as JUnit drops them; any other
/// C0 control or DEL becomes its symbol of the Control Pictures block (␀, ␇,
/// ␛, ␡), so that a NUL in a log is seen rather than sent raw; a C1 control
/// or U+FFFE and U+FFFF become U+FFFD.
pub(super) fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !has_unprintable(s) {
        return std::borrow::Cow::Borrowed(s);
    }
    let picture = |c: char| match c {
        '\u{0}'..='\u{1f}' => char::from_u32(0x2400 + c as u32).unwrap_or('\u{FFFD}'),
        '\u{7f}' => '\u{2421}',
        _ => '\u{FFFD}',
    };
    // Controls become pictures before escape sequences are stripped, which
    // would drop them (and tabs: the stripper is given what lies between).
    let pictured: String = s
        .chars()
        .map(|c| match c {
            '\u{1b}' | '\u{9b}' => c,
            c if unprintable(c) => picture(c),
            c => c,
        })
        .collect();
    let plain = if pictured.contains(['\u{1b}', '\u{9b}']) {
        pictured
            .split('\t')
            .map(strip_ansi_escapes::strip_str)
            .collect::<Vec<_>>()
            .join("\t")
    } else {
        pictured
    };
    // What the stripper let through of ESC and CSI.
    std::borrow::Cow::Owned(
        plain
            .chars()
            .map(|c| if unprintable(c) { picture(c) } else { c })
            .collect(),
    )
}
