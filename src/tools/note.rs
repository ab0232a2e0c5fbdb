//! A test-only tool family, whole in this one file plus its line in
//! [`super::FAMILIES`]: the proof that a family needs nothing else. Its `note` tool
//! records `note_added` events in `note` sessions through the shared write path; the
//! events fold into the tree and the summary, verify, export and re-import.
//!
//! It also plays a payload's change of shape: `note_added` was first written without
//! tags (schema 1, [`NoteAddedV1`], still constructible here as an older build would
//! write it) and is now written with them (schema 2, [`NoteAdded`]). Its codec reads
//! both; a schema-1 event is upcast for reading and keeps verifying as written.

use super::args::{Args, MAX_ID_BYTES, finish, string_list_schema};
use super::write::{Target, with_start};
use super::{
    CallFuture, Family, KindInfo, structured_result, tool_definition, writing_annotations,
};
use crate::event::family::{StoredCall, postcard_decode, postcard_encode};
use crate::event::summary::SessionSummary;
use crate::event::{
    CallRecord, CodecError, DecodeFields, FamilyEvent, FamilyPayload, PayloadCodec, SessionKind,
};
use crate::projection::tree::FoldTree;
use crate::projection::tree::{ThoughtNode, ThoughtTree};
use crate::request::ToolCall;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

impl SessionKind {
    /// A session of notes (test builds only).
    pub(crate) const NOTE: SessionKind = SessionKind::new("note");
}

/// Name of the one tool.
pub(crate) const NOTE: &str = "note";
/// Tag of its event.
pub(crate) const NOTE_ADDED: &str = "note_added";
/// Schema this build writes.
pub(crate) const NOTE_SCHEMA: u32 = 2;

pub(crate) static FAMILY: Family = Family {
    name: "note",
    instructions: "note (jot notes; test builds only)",
    default_on: false,
    listing_budget_bytes: 600,
    tools,
    aliases: &[],
    call,
    asks_the_client: false,
    kinds: &[KindInfo {
        kind: SessionKind::NOTE,
        label: "Notes",
    }],
    codec: Some(&NOTE_CODEC),
    folds: &[
        &crate::projection::tree::FoldOf::<NoteAdded>::NEW,
        &crate::projection::tree::FoldOf::<NoteAddedV1>::NEW,
    ],
    picture: None,
    render: None,
    prompts: &[],
    doctor: None,
};

fn tools() -> Vec<rmcp::model::Tool> {
    vec![tool_definition(
        NOTE,
        None,
        "Record a note.",
        json!({"type": "object", "properties": {
            "text": {"type": "string"},
            "tags": string_list_schema(),
            "sessionId": {"type": "string"},
            "key": {"type": "string", "description": "Idempotency key"}
        }, "required": ["text"]}),
        None,
        writing_annotations(),
    )]
}

fn call(mut call: ToolCall) -> CallFuture {
    Box::pin(async move {
        let mut args = Args::new(&call.arguments);
        let text = args.string(&["text"], true);
        let tags = args.string_list(&["tags"]).unwrap_or_default();
        let session_id = args.string_limited(&["sessionId"], false, MAX_ID_BYTES);
        let key = args.string_limited(&["key"], false, MAX_ID_BYTES);
        finish(NOTE, args)?;
        let text = text.expect("required");
        let target = Target {
            kind: SessionKind::NOTE,
            field: "sessionId",
            named: session_id,
            continue_key: Some(String::new()),
            remember_key: String::new(),
            idempotency_key: key,
        };
        let recorded = call
            .record(target, move |head, record| {
                let title = text.clone();
                with_start(
                    head,
                    SessionKind::NOTE,
                    &title,
                    [NoteAdded {
                        text,
                        tags,
                        call: record,
                    }
                    .into()],
                )
            })
            .await?;
        Ok(structured_result(json!({
            "sessionId": recorded.session.to_string(),
            "eventSeq": recorded.seq,
            "notes": recorded.head.summary.thoughts,
        }))
        .into())
    })
}

/// `note_added` as written now (schema 2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "note_added")]
pub(crate) struct NoteAdded {
    pub text: String,
    pub tags: Vec<String>,
    pub call: CallRecord,
}

/// `note_added` as schema 1 wrote it: no tags.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "note_added")]
pub(crate) struct NoteAddedV1 {
    pub text: String,
    pub call: CallRecord,
}

impl NoteAddedV1 {
    /// The upcaster: schema 1 → 2 (no tags then).
    fn upcast(self) -> NoteAdded {
        NoteAdded {
            text: self.text,
            tags: Vec::new(),
            call: self.call,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct StoredNote<'a> {
    text: &'a str,
    #[serde(borrow)]
    tags: Vec<&'a str>,
    #[serde(borrow)]
    call: StoredCall<'a>,
}

#[derive(Serialize, Deserialize)]
struct StoredNoteV1<'a> {
    text: &'a str,
    #[serde(borrow)]
    call: StoredCall<'a>,
}

impl FamilyEvent for NoteAdded {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &NOTE_CODEC
    }
    fn type_name(&self) -> &'static str {
        NOTE_ADDED
    }
    fn text(&self) -> Option<&str> {
        Some(&self.text)
    }
    fn call(&self) -> Option<&CallRecord> {
        Some(&self.call)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let stored = StoredNote {
            text: &self.text,
            tags: self.tags.iter().map(String::as_str).collect(),
            call: StoredCall::of(&self.call),
        };
        postcard_encode(&stored, out);
    }
    fn summarize(&self, summary: &mut SessionSummary, _new_branch: bool) {
        summary.thoughts += 1;
    }
}

impl FoldTree for NoteAdded {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        let number = tree.order.len() as u64 + 1;
        let mut node = ThoughtNode::new(seq, at, self.call.tool, number, self.text);
        node.open_items = self.tags;
        tree.add_thought(node);
    }
}

impl FamilyEvent for NoteAddedV1 {
    fn codec(&self) -> &'static dyn PayloadCodec {
        &NOTE_CODEC
    }
    fn type_name(&self) -> &'static str {
        NOTE_ADDED
    }
    fn schema(&self) -> u32 {
        1
    }
    fn text(&self) -> Option<&str> {
        Some(&self.text)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let stored = StoredNoteV1 {
            text: &self.text,
            call: StoredCall::of(&self.call),
        };
        postcard_encode(&stored, out);
    }
    fn summarize(&self, summary: &mut SessionSummary, new_branch: bool) {
        self.clone().upcast().summarize(summary, new_branch)
    }
}

impl FoldTree for NoteAddedV1 {
    fn fold_tree(self, seq: u64, at: u64, tree: &mut ThoughtTree) {
        self.upcast().fold_tree(seq, at, tree)
    }
}

fn refused(error: impl std::fmt::Display) -> CodecError {
    CodecError::Refused(error.to_string())
}

fn unknown_schema(schema: u32) -> CodecError {
    CodecError::Refused(format!("note schema {schema} is unknown to this build"))
}

pub(crate) struct NoteCodec;
pub(crate) static NOTE_CODEC: NoteCodec = NoteCodec;

/// Schema 1 read as written, then upcast: the JSON it was written as is kept.
fn upcast_v1(old: NoteAddedV1) -> Result<FamilyPayload, CodecError> {
    let written = serde_json::value::to_raw_value(&old).map_err(refused)?;
    Ok(FamilyPayload::upcast(Box::new(old.upcast()), written))
}

impl PayloadCodec for NoteCodec {
    fn family(&self) -> &'static str {
        "note"
    }
    fn schema(&self) -> u32 {
        NOTE_SCHEMA
    }
    fn types(&self) -> &'static [&'static str] {
        &[NOTE_ADDED]
    }
    fn decode(
        &self,
        _tag: &str,
        schema: u32,
        bytes: &[u8],
        fields: DecodeFields,
    ) -> Result<FamilyPayload, CodecError> {
        match schema {
            1 => {
                let stored: StoredNoteV1<'_> = postcard_decode(bytes)?;
                upcast_v1(NoteAddedV1 {
                    text: stored.text.to_string(),
                    call: stored.call.build(fields)?,
                })
            }
            NOTE_SCHEMA => {
                let stored: StoredNote<'_> = postcard_decode(bytes)?;
                Ok(FamilyPayload::new(NoteAdded {
                    text: stored.text.to_string(),
                    tags: stored.tags.into_iter().map(str::to_string).collect(),
                    call: stored.call.build(fields)?,
                }))
            }
            other => Err(unknown_schema(other)),
        }
    }
    fn decode_json(
        &self,
        _tag: &str,
        schema: u32,
        json: &str,
    ) -> Result<FamilyPayload, CodecError> {
        match schema {
            1 => {
                let old: NoteAddedV1 = serde_json::from_str(json).map_err(refused)?;
                let written = RawValue::from_string(json.to_string()).map_err(refused)?;
                Ok(FamilyPayload::upcast(Box::new(old.upcast()), written))
            }
            NOTE_SCHEMA => serde_json::from_str::<NoteAdded>(json)
                .map(FamilyPayload::new)
                .map_err(refused),
            other => Err(unknown_schema(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, NewEvent, Payload, SessionId};
    use crate::export::family::Exports;
    use crate::export::{self, Format};
    use crate::query as ledger_tools;
    use crate::server::LedgerServer;
    use crate::store::Ledger;
    use crate::tools::Toolset;
    use serde_json::Value;

    fn arguments(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    fn complete(response: rmcp::model::CallToolResponse) -> rmcp::model::CallToolResult {
        match response {
            rmcp::model::CallToolResponse::Complete(result) => result,
            other => panic!("expected a complete answer, got {other:?}"),
        }
    }

    /// Folds, renders and re-imports a session; the import must verify.
    fn export_all(ledger: &Ledger, session: SessionId) -> (String, String, String) {
        let head = ledger.head(session).unwrap().unwrap();
        let (tree, _) =
            ledger_tools::load_for_export(ledger, &head, None, Format::Markdown).unwrap();
        let (_, events) =
            ledger_tools::load_for_export(ledger, &head, None, Format::Jsonl).unwrap();
        let exports = Exports::of_families(ledger.families());
        let markdown = export::render(Format::Markdown, &tree, &events, &exports);
        let mermaid = export::render(Format::Mermaid, &tree, &events, &exports);
        let jsonl = export::render(Format::Jsonl, &tree, &events, &exports);
        let copy_dir = tempfile::tempdir().unwrap();
        let copy = Ledger::open(copy_dir.path(), crate::tools::families()).unwrap();
        let parsed: Vec<Event> = jsonl
            .lines()
            .map(|l| Event::from_json(l.as_bytes(), copy.families()).unwrap())
            .collect();
        copy.write_blocking(move |txn| txn.import(parsed))
            .unwrap()
            .unwrap();
        copy.verify_all().unwrap();
        let again = {
            let head = copy.head(session).unwrap().unwrap();
            let (tree, events) =
                ledger_tools::load_for_export(&copy, &head, None, Format::Jsonl).unwrap();
            export::render(Format::Jsonl, &tree, &events, &exports)
        };
        assert_eq!(again, jsonl, "JSONL survives an import byte for byte");
        (markdown, mermaid, jsonl)
    }

    #[test]
    fn a_family_in_one_file_lists_records_folds_verifies_and_exports() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let sets = Toolset::parse_list("note,ledger").unwrap();
        let server = LedgerServer::new(ledger.clone(), sets, false);
        let names: Vec<String> = server
            .listed_tools()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(names.last().map(String::as_str), Some(NOTE), "{names:?}");
        assert!(
            !names.iter().any(|n| n == "sequentialthinking"),
            "{names:?}"
        );
        assert!(server.instructions().contains("note (jot notes"));
        let call = |name: &str, args: Value| {
            complete(
                runtime
                    .block_on(server.dispatch(name, arguments(args)))
                    .unwrap(),
            )
        };
        let first = call(NOTE, json!({"text": "buy <milk>", "tags": ["home"]}));
        let answer = first.structured_content.clone().unwrap();
        let session = answer["sessionId"].as_str().unwrap().to_string();
        assert_eq!(answer["eventSeq"], 2, "{answer}");
        let second = call(NOTE, json!({"text": "call \"Bob\""}));
        let answer = second.structured_content.unwrap();
        assert_eq!(
            answer["sessionId"],
            session.as_str(),
            "continues the current session"
        );
        assert_eq!(answer["notes"], 2);
        // A keyed call that runs again records nothing new and answers the same.
        let keyed = call(NOTE, json!({"text": "once", "key": "k-1"}));
        let again = call(NOTE, json!({"text": "once", "key": "k-1"}));
        assert_eq!(keyed.structured_content, again.structured_content);
        assert_eq!(keyed.structured_content.unwrap()["eventSeq"], 4);
        let bad = call(NOTE, json!({"tags": "x"}));
        assert_eq!(bad.is_error, Some(true));

        let session: SessionId = session.parse().unwrap();
        assert_eq!(ledger.verify_all().unwrap().len(), 1);
        let (markdown, mermaid, jsonl) = export_all(&ledger, session);
        assert!(
            markdown.starts_with("# Notes: buy \\<milk\\>"),
            "{markdown}"
        );
        assert!(markdown.contains("call \"Bob\""), "{markdown}");
        assert!(mermaid.contains("flowchart"), "{mermaid}");
        assert_eq!(jsonl.lines().count(), 4, "the keyed note once");
        assert!(
            jsonl.contains(r#""type":"note_added","text":"buy <milk>","tags":["home"]"#),
            "{jsonl}"
        );

        let listed = call("list_sessions", json!({"kind": "note"}));
        assert_eq!(
            listed.structured_content.unwrap()["sessions"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn the_request_reaches_the_family_and_a_call_cancelled_before_its_write_records_nothing() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let server = LedgerServer::new(ledger.clone(), Toolset::parse_list("note").unwrap(), false);
        let request = crate::request::Request::detached();
        request.cancel.cancel();
        let answer = complete(
            runtime
                .block_on(server.dispatch_request(
                    NOTE,
                    arguments(json!({"text": "late"})),
                    request,
                ))
                .unwrap(),
        );
        assert_eq!(answer.is_error, Some(true));
        assert!(
            format!("{answer:?}").contains("nothing was recorded"),
            "{answer:?}"
        );
        assert!(ledger.heads().unwrap().is_empty());
    }

    #[test]
    fn a_schema_1_event_is_read_through_the_schema_2_upcaster_and_still_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(dir.path(), crate::tools::families()).unwrap();
        let session = SessionId::generate();
        // What an older build wrote: a schema-1 note, hashed and stored as schema 1.
        let old = NoteAddedV1 {
            text: "written by v1".into(),
            call: CallRecord {
                tool: NOTE.into(),
                raw_arguments: json!({"text": "written by v1"}).into(),
                duration_us: 3,
            },
        };
        let events = vec![
            NewEvent::new(Payload::SessionStarted {
                kind: SessionKind::NOTE,
                title: "notes".into(),
                aliases: Vec::new(),
            }),
            NewEvent::new(Payload::from(old.clone())),
        ];
        ledger
            .write_blocking(move |txn| txn.append(session, 0, events))
            .unwrap()
            .unwrap();
        // And what this build writes after it.
        let new = NoteAdded {
            text: "written by v2".into(),
            tags: vec!["t".into()],
            call: old.call.clone(),
        };
        let more = vec![NewEvent::new(Payload::from(new.clone()))];
        ledger
            .write_blocking(move |txn| txn.append(session, 2, more))
            .unwrap()
            .unwrap();

        let stored = ledger.events(session, 1, 3).unwrap();
        assert_eq!(stored[1].schema, 1);
        assert_eq!(stored[2].schema, NOTE_SCHEMA);
        let upcast: &NoteAdded = stored[1]
            .payload
            .family()
            .expect("read as the current shape");
        assert_eq!(upcast.text, "written by v1");
        assert!(upcast.tags.is_empty());
        assert_eq!(stored[2].payload.family::<NoteAdded>(), Some(&new));
        // Hashed as written: the stored hash is the one schema 1 computed.
        assert_eq!(stored[1].computed_hash(), stored[1].hash);
        ledger.verify_all().unwrap();

        let (_, _, jsonl) = export_all(&ledger, session);
        let line = jsonl.lines().nth(1).unwrap();
        assert!(
            line.contains(
                r#""schema":1,"payload":{"type":"note_added","text":"written by v1","call":"#
            ),
            "{line}"
        );
        assert!(!line.contains("tags"), "exported as written: {line}");
        let head = ledger.head(session).unwrap().unwrap();
        let tree = ledger_tools::load_tree(&ledger, &head, None).unwrap();
        assert_eq!(tree.thoughts().count(), 2);
    }
}
