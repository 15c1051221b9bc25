//! Text as the page carries it: what a browser should not be sent raw made
//! printable, then escaped by the template engine. The page and the trace
//! view both put every text they did not write themselves through [`Text`].

use maud::Render;

/// A text of a record, a journal or a trace on the page: made
/// [`printable`], then escaped as every value a template is given
/// (`&`, `<`, `>` and `"`; the templates quote every attribute with `"`).
pub(super) struct Text<'a>(pub(super) &'a str);

impl Render for Text<'_> {
    fn render_to(&self, buffer: &mut String) {
        printable(self.0).as_ref().render_to(buffer);
    }
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
