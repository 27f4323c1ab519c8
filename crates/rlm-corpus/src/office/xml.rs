//! A small pull interface over quick-xml for the office formats: elements
//! by local name (prefixes differ between writers), attributes by their
//! qualified or local name, text with entity and character references
//! resolved. Streaming: memory stays flat however deep the XML nests.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// One step through an XML document.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Node {
    /// An element opens (an empty element opens and then closes).
    Open(Element),
    /// The element with this local name closes.
    Close(String),
    /// Text (or CDATA) inside the current element.
    Text(String),
}

/// An opening element: its local name and attributes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Element {
    /// Local name (`p` for `w:p`).
    pub name: String,
    /// (qualified name, value) of each attribute.
    pub attrs: Vec<(String, String)>,
}

impl Element {
    /// The value of the attribute whose qualified name is `name`
    /// (`w:val`), else of the first whose local name is `name`'s local part.
    pub fn attr(&self, name: &str) -> Option<&str> {
        if let Some((_, v)) = self.attrs.iter().find(|(k, _)| k == name) {
            return Some(v);
        }
        let local = name.rsplit(':').next().unwrap_or(name);
        self.attrs
            .iter()
            .find(|(k, _)| k.rsplit(':').next() == Some(local))
            .map(|(_, v)| v.as_str())
    }
}

/// The nodes of an XML text, in order.
pub(crate) struct Nodes<'a> {
    reader: Reader<&'a [u8]>,
    /// An empty element's close, owed after its open was returned.
    pending_close: Option<String>,
    done: bool,
}

impl<'a> Nodes<'a> {
    /// Reads `xml` (UTF-8; invalid bytes were replaced by the caller).
    pub fn new(xml: &'a str) -> Nodes<'a> {
        let mut reader = Reader::from_str(xml);
        // Office writers close what they open; a stray end tag is a broken
        // file, which the reader reports instead of guessing.
        reader.config_mut().check_end_names = false;
        Nodes {
            reader,
            pending_close: None,
            done: false,
        }
    }

    /// The next node; `Ok(None)` at the end, `Err` with what is wrong.
    pub fn next_node(&mut self) -> Result<Option<Node>, String> {
        if let Some(name) = self.pending_close.take() {
            return Ok(Some(Node::Close(name)));
        }
        while !self.done {
            let event = self.reader.read_event().map_err(|e| {
                format!("invalid XML at byte {}: {e}", self.reader.buffer_position())
            })?;
            match event {
                Event::Start(e) => return Ok(Some(Node::Open(element(&e)))),
                Event::Empty(e) => {
                    let el = element(&e);
                    self.pending_close = Some(el.name.clone());
                    return Ok(Some(Node::Open(el)));
                }
                Event::End(e) => {
                    return Ok(Some(Node::Close(e.local_name().as_ref().to_string())));
                }
                Event::Text(t) => return Ok(Some(Node::Text(t.xml10_content().into_owned()))),
                Event::CData(t) => return Ok(Some(Node::Text(t.xml10_content().into_owned()))),
                Event::GeneralRef(r) => {
                    if let Some(text) = resolve_reference(&r) {
                        return Ok(Some(Node::Text(text)));
                    }
                }
                Event::Eof => self.done = true,
                _ => {}
            }
        }
        Ok(None)
    }
}

fn element(e: &BytesStart<'_>) -> Element {
    let attrs = e
        .attributes()
        .flatten()
        .map(|a| {
            let value = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map(|v| v.into_owned())
                .unwrap_or_else(|_| a.value.to_string());
            (a.key.as_ref().to_string(), value)
        })
        .collect();
    Element {
        name: e.local_name().as_ref().to_string(),
        attrs,
    }
}

/// The text of `&amp;`, `&#x41;` and the other predefined references; an
/// unknown named entity (declared in a DTD, which office files have not)
/// is dropped.
fn resolve_reference(r: &quick_xml::events::BytesRef<'_>) -> Option<String> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Some(c.to_string());
    }
    let name = r.xml10_content();
    let c = match name.as_ref() {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        _ => return None,
    };
    Some(c.to_string())
}

/// Every node of `xml`, handed to `visit` in order; stops at the first
/// XML error.
pub(crate) fn walk(xml: &str, mut visit: impl FnMut(Node)) -> Result<(), String> {
    let mut nodes = Nodes::new(xml);
    while let Some(node) = nodes.next_node()? {
        visit(node);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(xml: &str) -> Vec<Node> {
        let mut out = Vec::new();
        walk(xml, |n| out.push(n)).unwrap();
        out
    }

    #[test]
    fn local_names_attributes_and_references() {
        let nodes = all(r#"<w:p a:x="1 &amp; 2"><w:t>A &amp; B &#x263A;</w:t><w:br/></w:p>"#);
        let Node::Open(p) = &nodes[0] else { panic!() };
        assert_eq!(p.name, "p");
        assert_eq!(p.attr("a:x"), Some("1 & 2"));
        assert_eq!(p.attr("x"), Some("1 & 2"));
        let text: String = nodes
            .iter()
            .filter_map(|n| match n {
                Node::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, "A & B ☺");
        assert!(nodes.contains(&Node::Close("br".into())));
    }

    #[test]
    fn broken_xml_is_an_error_not_a_panic() {
        assert!(walk("<a x='1></a>", |_| {}).is_err());
    }
}
