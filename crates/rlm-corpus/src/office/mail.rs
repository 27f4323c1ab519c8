//! E-mail: an `.eml` file is one message, an `.mbox` file one message per
//! `From ` line. Each message is a document with its headers (from, to,
//! cc, date, subject) above its text, cited as `message of 2024-03-02
//! from Anna Berg`; each attachment is a document of its own, named under
//! its message's path (`inbox.mbox/message-3/offer.pdf`).

use std::io::Cursor;
use std::path::Path;

use mail_parser::mailbox::mbox::MessageIterator;
use mail_parser::{Address, Message, MessageParser, MimeHeaders};

use super::{DocText, ReadFile, push_member, safe_segment};
use crate::chunk::Place;
use crate::extracted::{DocKind, ExtractError, Extraction, Member, non_empty};
use crate::html::html_to_text;

/// Most messages read from one mailbox; a larger one is refused (split it).
pub const MAX_MESSAGES: usize = 100_000;
/// Most attachments read from one message.
pub const MAX_ATTACHMENTS: usize = 1_000;

/// One `.eml` message and its attachments.
pub(super) fn extract_eml(bytes: &[u8], depth: usize, read_file: ReadFile) -> Extraction {
    let Some(message) = MessageParser::default().parse(bytes) else {
        return corrupt("e-mail", "no message headers found");
    };
    if message.headers().is_empty() {
        return corrupt("e-mail", "no message headers found");
    }
    let mut members = Vec::new();
    message_members(&message, "", (depth, read_file), &mut members);
    Extraction::Many(members)
}

/// Every message of an mbox file, each followed by its attachments.
pub(super) fn extract_mbox(bytes: &[u8], depth: usize, read_file: ReadFile) -> Extraction {
    if !bytes.starts_with(b"From ") {
        return corrupt(
            "mailbox",
            "it does not start with a \"From \" line: not an mbox file",
        );
    }
    let parser = MessageParser::default();
    let mut members = Vec::new();
    for (i, raw) in MessageIterator::new(Cursor::new(bytes)).enumerate() {
        if i >= MAX_MESSAGES {
            return Extraction::Failed(ExtractError::Refused {
                format: "mailbox",
                why: format!("more than {MAX_MESSAGES} messages; split it into smaller files"),
            });
        }
        let name = format!("message-{}", i + 1);
        let Ok(raw) = raw else {
            break;
        };
        match parser.parse(raw.contents()) {
            Some(message) => message_members(&message, &name, (depth, read_file), &mut members),
            None => members.push(Member {
                name,
                extraction: corrupt("e-mail", "the message has no readable headers"),
            }),
        }
    }
    Extraction::Many(members)
}

fn corrupt(format: &'static str, why: &str) -> Extraction {
    Extraction::Failed(ExtractError::Corrupt {
        format,
        why: why.to_string(),
    })
}

/// Adds `message` (named `name`, empty for the file itself) and its
/// attachments (under `name/`, each read by `read_file` one container
/// deeper than `depth`) to `members`.
fn message_members(
    message: &Message<'_>,
    name: &str,
    (depth, read_file): (usize, ReadFile),
    members: &mut Vec<Member>,
) {
    let attachments: Vec<_> = message.attachments().take(MAX_ATTACHMENTS).collect();
    let mut names: Vec<String> = Vec::new();
    for (i, part) in attachments.iter().enumerate() {
        let fallback = format!("attachment-{}", i + 1);
        let mut file = safe_segment(part.attachment_name().unwrap_or_default(), &fallback);
        if part.is_message() && Path::new(&file).extension().is_none() {
            file.push_str(".eml");
        }
        while names.contains(&file) {
            file = format!("{}-{file}", i + 1);
        }
        names.push(file);
    }
    members.push(Member {
        name: name.to_string(),
        extraction: non_empty(message_text(message, &names)),
    });
    for (part, file) in attachments.iter().zip(&names) {
        let bytes: &[u8] = match part.message() {
            Some(inner) => inner.raw_message(),
            None => part.contents(),
        };
        let path = if name.is_empty() {
            file.clone()
        } else {
            format!("{name}/{file}")
        };
        let extraction = read_file(Path::new(file), bytes, depth + 1);
        push_member(members, &path, extraction);
    }
}

/// The message as a document: its headers, its text, its attachments' names.
fn message_text(message: &Message<'_>, attachments: &[String]) -> crate::extracted::Extracted {
    let from = addresses(message.from());
    let date = message.date().map(|d| {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}",
            d.year, d.month, d.day, d.hour, d.minute
        )
    });
    let mut out = DocText::new();
    out.start(Place::Named(citation(
        date.as_deref().map(|d| &d[..10]),
        message.from(),
    )));
    let headers = [
        ("From", from),
        ("To", addresses(message.to())),
        ("Cc", addresses(message.cc())),
        ("Date", date.unwrap_or_default()),
        ("Subject", message.subject().unwrap_or_default().to_string()),
    ];
    for (label, value) in headers {
        if !value.is_empty() {
            out.line(&format!(
                "{label}: {}",
                value.split_whitespace().collect::<Vec<_>>().join(" ")
            ));
        }
    }
    if !attachments.is_empty() {
        out.line(&format!("Attachments: {}", attachments.join(", ")));
    }
    out.blank();
    for i in 0..message.text_body_count() {
        if let Some(text) = message.body_text(i) {
            out.paragraph(&text);
        }
    }
    if message.text_body_count() == 0 {
        for i in 0..message.html_body_count() {
            if let Some(html) = message.body_html(i) {
                out.paragraph(&html_to_text(&html).text);
            }
        }
    }
    let title = message.subject().map(str::to_string);
    out.finish(DocKind::Email, title)
}

/// `Name <address>` of each address, comma-separated.
fn addresses(address: Option<&Address<'_>>) -> String {
    let Some(address) = address else {
        return String::new();
    };
    address
        .iter()
        .map(|a| match (a.name(), a.address()) {
            (Some(n), Some(addr)) => format!("{n} <{addr}>"),
            (Some(n), None) => n.to_string(),
            (None, Some(addr)) => addr.to_string(),
            (None, None) => String::new(),
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How a citation names a message: `message of <date> from <sender>`.
fn citation(date: Option<&str>, from: Option<&Address<'_>>) -> String {
    let sender = from
        .and_then(|a| a.first())
        .and_then(|a| a.name().or(a.address()))
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "));
    match (date, sender) {
        (Some(d), Some(s)) => format!("message of {d} from {s}"),
        (Some(d), None) => format!("message of {d}"),
        (None, Some(s)) => format!("message from {s}"),
        (None, None) => "message".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE: &str = "From: Anna Berg <anna@example.org>\r\nTo: Ben <ben@example.org>\r\nDate: Sat, 2 Mar 2024 10:15:00 +0100\r\nSubject: =?UTF-8?Q?K=C3=BCndigung?=\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nDie Frist endet am 31. Mai.\r\n--b\r\nContent-Type: text/plain; name=\"notiz.txt\"\r\nContent-Disposition: attachment; filename=\"notiz.txt\"\r\n\r\nAnhang: Zimmer 12\r\n--b--\r\n";

    #[test]
    fn a_message_and_its_attachment_are_documents() {
        let Extraction::Many(members) =
            extract_eml(MESSAGE.as_bytes(), 0, crate::extract::extract_nested)
        else {
            panic!("expected members")
        };
        assert_eq!(members.len(), 2);
        let Extraction::Text(message) = &members[0].extraction else {
            panic!("{:?}", members[0])
        };
        assert_eq!(members[0].name, "");
        assert!(
            message
                .text
                .starts_with("From: Anna Berg <anna@example.org>\nTo: Ben <ben@example.org>\n")
        );
        assert!(
            message
                .text
                .contains("Subject: Kündigung\nAttachments: notiz.txt\n")
        );
        assert!(message.text.contains("Die Frist endet am 31. Mai."));
        assert_eq!(
            message.sections.as_ref().unwrap()[0].place,
            Place::Named("message of 2024-03-02 from Anna Berg".into())
        );
        assert_eq!(members[1].name, "notiz.txt");
        assert!(
            matches!(&members[1].extraction, Extraction::Text(t) if t.text.contains("Zimmer 12"))
        );
    }

    #[test]
    fn mbox_messages_are_numbered() {
        let mbox = format!(
            "From a@b Sat Mar  2 10:15:00 2024\n{MESSAGE}\nFrom c@d Sun Mar  3 10:15:00 2024\nFrom: C <c@d>\nSubject: zwei\n\nText zwei\n"
        );
        let Extraction::Many(members) =
            extract_mbox(mbox.as_bytes(), 0, crate::extract::extract_nested)
        else {
            panic!()
        };
        let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["message-1", "message-1/notiz.txt", "message-2"]);
        assert!(matches!(
            extract_mbox(b"not a mailbox", 0, crate::extract::extract_nested),
            Extraction::Failed(_)
        ));
    }
}
