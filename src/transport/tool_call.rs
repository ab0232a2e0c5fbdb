//! The common line decoded directly: a `tools/call` request.
//!
//! rmcp decodes any message by trying its shapes in turn over a buffered copy of the line
//! (an untagged message, a flattened request, `_meta` lifted out of the params): for a
//! tool call, about a sixth of the server's instructions per call. Nearly every line a
//! server reads is a tool call, so [`decode`] reads that one shape straight into rmcp's
//! types, and gives up (`None`) on anything else — another method, an unknown field, a
//! `_meta`, a field that does not decode — which then takes rmcp's way exactly as before.
//!
//! Must not: accept a line rmcp would refuse, or produce a message other than the one
//! rmcp's own decoding gives for the same line (the tests compare the two).

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, JsonRpcMessage, JsonRpcRequest,
    JsonRpcVersion2_0, RequestId,
};
use rmcp::service::RxJsonRpcMessage;
use serde::Deserialize;
use std::borrow::Cow;

/// The envelope of a tool call, every field named (anything else: rmcp's way).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallLine<'a> {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    params: CallToolRequestParams,
}

/// The request on `line` when it is a plain `tools/call`; `None` for rmcp to decode.
pub(super) fn decode(line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
    let call: ToolCallLine<'_> = serde_json::from_slice(line).ok()?;
    if call.method != "tools/call" || call.params.meta.is_some() {
        return None;
    }
    Some(JsonRpcMessage::Request(JsonRpcRequest::new(
        call.id,
        ClientRequest::CallToolRequest(CallToolRequest::new(call.params)),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What rmcp's own decoding makes of `line`, as JSON (the message types do not compare).
    fn rmcp_way(line: &str) -> Option<serde_json::Value> {
        let message: RxJsonRpcMessage<RoleServer> = serde_json::from_str(line).ok()?;
        Some(serde_json::to_value(message).unwrap())
    }

    #[test]
    fn a_plain_tool_call_decodes_as_rmcp_decodes_it() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sequentialthinking","arguments":{"thought":"a \"quoted\" é thought","thoughtNumber":1,"totalThoughts":3,"nextThoughtNeeded":true}}}"#,
            r#"{"id":"abc","method":"tools/call","jsonrpc":"2.0","params":{"name":"think"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"requestState":"s","unknown":1}}"#,
            r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"arguments":{"a":[1,{"b":null}]},"name":"y"}}"#,
        ];
        for line in lines {
            let fast = decode(line.as_bytes()).unwrap_or_else(|| panic!("not decoded: {line}"));
            let JsonRpcMessage::Request(request) = &fast else {
                panic!("not a request: {line}");
            };
            let ClientRequest::CallToolRequest(call) = &request.request else {
                panic!("not a tool call: {line}");
            };
            assert!(call.extensions.is_empty(), "{line}");
            assert_eq!(
                Some(serde_json::to_value(&fast).unwrap()),
                rmcp_way(line),
                "{line}"
            );
        }
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        let lines = [
            // Another method, a notification, a response.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            // A `_meta` (rmcp lifts it into the request's extensions).
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}"#,
            // An unknown envelope field, a wrong version, a bad id, params that do not decode.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"extra":1}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            // A duplicate field, and not JSON at all.
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}"#,
        ];
        for line in lines {
            assert!(decode(line.as_bytes()).is_none(), "{line}");
        }
    }
}
