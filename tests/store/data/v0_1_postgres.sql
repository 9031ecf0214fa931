--
-- PostgreSQL database dump
--


-- Dumped from database version 15.20 (Debian 15.20-0+deb12u1)
-- Dumped by pg_dump version 15.20 (Debian 15.20-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: bases; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.bases (
    run_id text NOT NULL,
    seq bigint NOT NULL,
    snapshot jsonb NOT NULL
);


--
-- Name: charts; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.charts (
    version text NOT NULL,
    description text NOT NULL,
    source text
);


--
-- Name: event_rows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.event_rows (
    id bigint NOT NULL,
    "time" double precision NOT NULL,
    source text NOT NULL,
    target text NOT NULL,
    trigger text NOT NULL,
    actor text NOT NULL,
    reason text,
    tool text,
    refused text,
    error text,
    steps bigint NOT NULL,
    model_calls bigint NOT NULL,
    tool_calls bigint NOT NULL,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cost_micros bigint NOT NULL,
    wall_ms bigint NOT NULL,
    intent text,
    key text,
    by text,
    fingerprint text,
    exhausted text,
    edge text,
    closes text,
    span text,
    visit bigint,
    messages jsonb,
    body jsonb NOT NULL,
    intent_state text,
    intent_call text,
    run_steps bigint,
    run_model_calls bigint,
    run_tool_calls bigint,
    run_input_tokens bigint,
    run_output_tokens bigint,
    run_cost_micros bigint,
    run_wall_ms bigint,
    holder text
);


--
-- Name: intent_rows; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.intent_rows (
    run_id text NOT NULL,
    seq bigint NOT NULL,
    call_id text NOT NULL,
    state text NOT NULL,
    tool text NOT NULL,
    call text NOT NULL,
    key text
);


--
-- Name: leases; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.leases (
    n bigint NOT NULL,
    run_id text NOT NULL,
    holder text NOT NULL,
    acquired double precision NOT NULL,
    seq bigint NOT NULL,
    took_over_from text,
    released double precision,
    clean boolean
);


--
-- Name: leases_n_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.leases ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.leases_n_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    num bigint NOT NULL,
    run_id text NOT NULL,
    chart text NOT NULL,
    status text NOT NULL,
    state text NOT NULL,
    seq bigint NOT NULL,
    snapshot jsonb NOT NULL,
    lease_holder text,
    lease_expires double precision DEFAULT 0 NOT NULL,
    lease_seq bigint,
    lease_process text,
    chart_version text,
    ready boolean DEFAULT false NOT NULL,
    tries integer DEFAULT 0 NOT NULL,
    next_try double precision DEFAULT 0 NOT NULL,
    problem text,
    blocked boolean DEFAULT false NOT NULL
);


--
-- Name: runs_num_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.runs ALTER COLUMN num ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.runs_num_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: statechart_schema; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.statechart_schema (
    version integer NOT NULL
);


--
-- Data for Name: bases; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.bases VALUES ('v01-done', 0, '{"chart": "v01", "model": "scripted", "state": "gather.think", "visit": {"seq": 0, "state": "gather"}, "run_id": "v01-done", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "A-7", "resolution": null}, "created_at": 1796398319.837531, "lineage_root": "v01-done", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-waiting', 0, '{"chart": "v01", "model": "scripted", "state": "gather.think", "visit": {"seq": 0, "state": "gather"}, "run_id": "v01-waiting", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "B-9", "resolution": null}, "created_at": 1796398319.883042, "lineage_root": "v01-waiting", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-rejected', 6, '{"seq": 6, "chart": "v01", "model": "scripted", "state": "resolve.approve", "visit": {"seq": 4, "state": "resolve", "iterations": 1}, "ledger": {"root": {"steps": 6, "cost_micros": 21, "model_calls": 3, "input_tokens": 90, "output_tokens": 30}, "gather": {"steps": 2, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "reason": "tool ''refund'' needs approval in state ''resolve''", "run_id": "v01-rejected", "status": "waiting", "visits": {"gather": 1, "resolve": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged twice", "findings": "one duplicate", "order_id": "B-9", "resolution": null}, "pending": [{"key": "756732e48346ebeb3223bee8942bb4f2", "call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}}], "created_at": 1796398319.8919015, "parent_run": "v01-waiting", "parent_seq": 6, "lineage_root": "v01-waiting", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-approved', 6, '{"seq": 6, "chart": "v01", "model": "scripted", "state": "resolve.approve", "visit": {"seq": 4, "state": "resolve", "iterations": 1}, "ledger": {"root": {"steps": 6, "cost_micros": 21, "model_calls": 3, "input_tokens": 90, "output_tokens": 30}, "gather": {"steps": 2, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "reason": "tool ''refund'' needs approval in state ''resolve''", "run_id": "v01-approved", "status": "waiting", "visits": {"gather": 1, "resolve": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged twice", "findings": "one duplicate", "order_id": "B-9", "resolution": null}, "pending": [{"key": "756732e48346ebeb3223bee8942bb4f2", "call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}}], "created_at": 1796398319.905355, "parent_run": "v01-waiting", "parent_seq": 6, "lineage_root": "v01-waiting", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-exhausted', 0, '{"chart": "v01", "model": "scripted", "state": "gather.think", "visit": {"seq": 0, "state": "gather"}, "run_id": "v01-exhausted", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "D-1", "resolution": null}, "created_at": 1796398319.910236, "lineage_root": "v01-exhausted", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-fork', 1, '{"seq": 1, "chart": "v01", "doubt": "l1", "model": "scripted", "state": "gather.act", "visit": {"seq": 0, "state": "gather", "iterations": 1}, "ledger": {"root": {"steps": 1, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}, "gather": {"steps": 1, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "run_id": "v01-fork", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "A-7", "resolution": null}, "pending": [{"key": "77a61a50e83c77fa20c8b822a1bc8af2", "call": {"id": "l1", "name": "lookup", "arguments": {"order_id": "A-7"}}}, {"call": {"id": "l2", "name": "lookup", "arguments": {"order_id": "A-7"}}}], "created_at": 1796398319.9202437, "parent_run": "v01-done", "parent_seq": 1, "lineage_root": "v01-done", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-killed', 0, '{"chart": "v01", "model": "scripted", "state": "gather.think", "visit": {"seq": 0, "state": "gather"}, "run_id": "v01-killed", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "G-5", "resolution": null}, "created_at": 1796398319.9233856, "lineage_root": "v01-killed", "chart_version": "d8bd3aaa7d7f799e"}');
INSERT INTO public.bases VALUES ('v01-cancelled', 0, '{"chart": "v01", "model": "scripted", "state": "gather.think", "trace": {"traceparent": "00-0752f6020182c26b1960f3aaba60b257-1929f8239926c4db-03"}, "visit": {"seq": 0, "state": "gather"}, "run_id": "v01-cancelled", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "F-3", "resolution": null}, "created_at": 1796398319.9489276, "lineage_root": "v01-cancelled", "chart_version": "d8bd3aaa7d7f799e"}');


--
-- Data for Name: charts; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.charts VALUES ('d8bd3aaa7d7f799e', 'chart v01 initial=gather budget=Budget(max_steps=40, max_model_calls=None, max_tool_calls=None, max_input_tokens=None, max_output_tokens=None, max_tokens=None, max_cost_micros=None, max_wall_seconds=None) exhausted=escalated context={"properties": {"facts": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Facts"}, "findings": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Findings"}, "order_id": {"default": "", "title": "Order Id", "type": "string"}, "resolution": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Resolution"}}, "title": "Ticket", "type": "object"}
state gather model tools=[lookup:safe:False:False:{"properties": {"order_id": {"type": "string"}}, "required": ["order_id"], "type": "object"},ledger:safe:False:False:{"properties": {"order_id": {"type": "string"}}, "required": ["order_id"], "type": "object"}] reads=(''order_id'',) writes=(''facts'',) iter=10 visits=None calls=[] budget=Budget(max_steps=None, max_model_calls=None, max_tool_calls=None, max_input_tokens=None, max_output_tokens=None, max_tokens=20000, max_cost_micros=None, max_wall_seconds=None, strict=True) exhausted=failed exits=[] approve=None reject=None resume=False
state research chart tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[(''done'', ''resolve'')] approve=None reject=None resume=False input=[(''question'', ''order_id'')] output=[(''findings'', ''findings'')]
{chart research initial=dig budget=None exhausted=escalated context={"properties": {"findings": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Findings"}, "question": {"default": "", "title": "Question", "type": "string"}}, "title": "Notes", "type": "object"}
state dig model tools=[search:safe:False:False:{"properties": {"question": {"type": "string"}}, "required": ["question"], "type": "object"}] reads=(''question'',) writes=(''findings'',) iter=10 visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state done terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state escalated terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state exhausted terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
edge dig->done guard=False max=None}
state resolve model tools=[refund:keyed:True:False:{"properties": {"amount_cents": {"type": "integer"}, "order_id": {"type": "string"}}, "required": ["order_id", "amount_cents"], "type": "object"}] reads=(''order_id'', ''facts'', ''findings'') writes=(''resolution'',) iter=10 visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state check code tools=[] reads=() writes=(''resolution'',) iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state done terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state failed terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state escalated terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
state exhausted terminal tools=[] reads=() writes=() iter=None visits=None calls=[] budget=None exhausted=escalated exits=[] approve=None reject=None resume=False
edge gather->research guard=True max=None
edge gather->failed guard=False max=None
edge resolve->check guard=False max=None
edge resolve->failed guard=False max=1
edge check->done guard=False max=None', NULL);


--
-- Data for Name: event_rows; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.event_rows VALUES (4294967297, 1796398319.8438733, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'lookup,lookup', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 'l1', '77a61a50e83c77fa20c8b822a1bc8af2', NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "content": "Looking the order up.", "tool_calls": [{"id": "l1", "name": "lookup", "arguments": {"order_id": "A-7"}}, {"id": "l2", "name": "lookup", "arguments": {"order_id": "A-7"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', 'gather', '{"id":"l1","name":"lookup","arguments":{"order_id":"A-7"}}', 1, 1, 0, 30, 10, 7, 0, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967298, 1796398319.8450437, 'gather.act', 'gather.act', 'next_call', 'code', NULL, 'lookup', NULL, NULL, 1, 0, 1, 0, 0, 0, 0, 'l2', '77a61a50e83c77fa20c8b822a1bc8af2', NULL, 'b0cdddff5bd94623b83881b5', NULL, NULL, 'l1', NULL, 0, '[{"role": "tool", "content": "{\"amount_cents\":2000,\"order_id\":\"A-7\",\"outcome\":\"hit\",\"status\":\"charged\"}", "tool_call_id": "l1"}]', '{"call": {"id": "l1", "name": "lookup", "arguments": {"order_id": "A-7"}}, "delta": 1, "exited": ["gather.act"], "entered": ["gather.act"], "outcome": "hit", "result@": 1}', 'gather', '{"id":"l2","name":"lookup","arguments":{"order_id":"A-7"}}', 2, 1, 1, 30, 10, 7, 0, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967299, 1796398319.8460085, 'gather.act', 'gather.think', 'refuse', 'model', NULL, 'lookup', 'tool ''lookup'' already ran with these arguments; its result is above. Do not repeat a call; change the arguments or move on', NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 'l2', NULL, 0, '[{"role": "tool", "content": "refused: tool ''lookup'' already ran with these arguments; its result is above. Do not repeat a call; change the arguments or move on", "tool_call_id": "l2"}]', '{"call": {"id": "l2", "name": "lookup", "arguments": {"order_id": "A-7"}}, "delta": 1, "exited": ["gather.act"], "entered": ["gather.think"], "result@": 1}', NULL, NULL, 3, 1, 1, 30, 10, 7, 0, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967300, 1796398319.8468475, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "n0", "name": "next_state", "arguments": {"target": "research"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', NULL, NULL, 4, 2, 1, 60, 20, 14, 1, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967301, 1796398319.8475757, 'gather.act', 'gather.think', 'refuse', 'model', NULL, 'next_state', 'edge gather->research refused: write the facts first', NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "tool", "content": "refused: edge gather->research refused: write the facts first", "tool_call_id": "n0"}]', '{"call": {"id": "n0", "name": "next_state", "arguments": {"target": "research"}}, "delta": 1, "exited": ["gather.act"], "entered": ["gather.think"], "result@": 1}', NULL, NULL, 5, 2, 1, 60, 20, 14, 1, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967302, 1796398319.8483443, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "n1", "name": "next_state", "arguments": {"facts": "charged twice", "target": "research"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', NULL, NULL, 6, 3, 1, 90, 30, 21, 1, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967303, 1796398319.84932, 'gather.act', 'research.dig.think', 'go:research', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'gather->research', NULL, NULL, 0, '[{"role": "tool", "content": "moved to ''research''", "tool_call_id": "n1"}]', '{"call": {"id": "n1", "name": "next_state", "arguments": {"facts": "charged twice", "target": "research"}}, "delta": 1, "patch": {"facts": "charged twice"}, "exited": ["gather.act", "gather"], "inputs": {"research": {"findings": null, "question": "A-7"}}, "entered": ["research", "research.dig", "research.dig.think"], "result@": 1}', NULL, NULL, 7, 3, 1, 90, 30, 21, 1, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967304, 1796398319.864275, 'research.dig.think', 'research.dig.act', 'propose', 'model', NULL, 'search', NULL, NULL, 1, 1, 0, 30, 10, 7, 14, 's1', '3ac6323c144da2ac93e1bbf295c62fe3', NULL, NULL, NULL, NULL, NULL, NULL, 7, '[{"role": "assistant", "tool_calls": [{"id": "s1", "name": "search", "arguments": {"question": "A-7"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["research.dig.think"], "entered": ["research.dig.act"]}', 'research.dig', '{"id":"s1","name":"search","arguments":{"question":"A-7"}}', 8, 4, 1, 120, 40, 28, 15, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967305, 1796398319.865427, 'research.dig.act', 'research.dig.think', 'results', 'code', NULL, 'search', NULL, NULL, 1, 0, 1, 0, 0, 0, 0, NULL, NULL, NULL, '5ad4f2c88751424a2c4f2970', NULL, NULL, 's1', NULL, 7, '[{"role": "tool", "content": "notes about A-7: one duplicate charge", "tool_call_id": "s1"}]', '{"call": {"id": "s1", "name": "search", "arguments": {"question": "A-7"}}, "delta": 1, "exited": ["research.dig.act"], "entered": ["research.dig.think"], "result@": 1}', NULL, NULL, 9, 4, 2, 120, 40, 28, 15, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967306, 1796398319.8661926, 'research.dig.think', 'research.dig.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 7, '[{"role": "assistant", "tool_calls": [{"id": "n2", "name": "next_state", "arguments": {"target": "done", "findings": "a duplicate"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["research.dig.think"], "entered": ["research.dig.act"]}', NULL, NULL, 10, 5, 2, 150, 50, 35, 15, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967307, 1796398319.8668985, 'research.dig.act', 'resolve.think', 'go:research.done', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'research.dig->research.done', NULL, NULL, 7, '[{"role": "tool", "content": "moved to ''done''", "tool_call_id": "n2"}]', '{"call": {"id": "n2", "name": "next_state", "arguments": {"target": "done", "findings": "a duplicate"}}, "delta": 1, "patch": {"findings": "a duplicate"}, "scope": "research", "exited": ["research.dig.act", "research.dig", "research"], "entered": ["resolve", "resolve.think"], "outputs": {"research": {"findings": "a duplicate"}}, "result@": 1}', NULL, NULL, 11, 5, 2, 150, 50, 35, 15, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967308, 1796398319.8684602, 'resolve.think', 'resolve.act', 'propose', 'model', NULL, 'refund', NULL, NULL, 1, 1, 0, 30, 10, 7, 1, 'r1', '07000a7b5b3c5c26a89d7945f2653d32', NULL, NULL, NULL, NULL, NULL, NULL, 11, '[{"role": "assistant", "tool_calls": [{"id": "r1", "name": "refund", "arguments": {"order_id": "A-7", "amount_cents": 2000}}]}]', '{"delta": 1, "calls@": 1, "exited": ["resolve.think"], "entered": ["resolve.act"]}', 'resolve', '{"id":"r1","name":"refund","arguments":{"order_id":"A-7","amount_cents":2000}}', 12, 6, 2, 180, 60, 42, 16, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967309, 1796398319.8692315, 'resolve.act', 'resolve.approve', 'ask', 'system', 'tool ''refund'' needs approval in state ''resolve''', 'refund', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{"call": {"id": "r1", "name": "refund", "arguments": {"order_id": "A-7", "amount_cents": 2000}}, "exited": ["resolve.act"], "entered": ["resolve.approve"]}', NULL, NULL, 13, 6, 2, 180, 60, 42, 16, 'vm:13032:955ba9c2#cb836495');
INSERT INTO public.event_rows VALUES (4294967310, 1796398319.8727615, 'resolve.approve', 'resolve.act', 'approved', 'human', 'approved by ops: less', 'refund', NULL, NULL, 0, 0, 0, 0, 0, 0, 0, 'r1', 'f0bc24d35ea49369bac366552bfd2732', 'ops', NULL, NULL, NULL, 'r1', NULL, NULL, NULL, '{"call": {"id": "r1", "name": "refund", "arguments": {"order_id": "A-7", "amount_cents": 1500}}, "exited": ["resolve.approve"], "result": "edited arguments: {''amount_cents'': 1500}", "entered": ["resolve.act"]}', 'resolve', '{"id":"r1","name":"refund","arguments":{"order_id":"A-7","amount_cents":1500}}', 13, 6, 2, 180, 60, 42, 16, NULL);
INSERT INTO public.event_rows VALUES (4294967311, 1796398319.8781679, 'resolve.act', 'resolve.act', 'model', 'system', 'model changed from scripted to scripted:second', NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{"model": "scripted:second"}', NULL, NULL, 13, 6, 2, 180, 60, 42, 16, 'vm:13032:276e633f#a748f637');
INSERT INTO public.event_rows VALUES (4294967312, 1796398319.87894, 'resolve.act', 'resolve.think', 'results', 'code', NULL, 'refund', NULL, NULL, 1, 0, 1, 0, 0, 0, 0, NULL, NULL, NULL, '72299411cfa0f3a66c0c67e1', NULL, NULL, 'r1', NULL, 11, '[{"role": "tool", "content": "{\"amount_cents\":1500,\"key\":\"f0bc24d35ea49369bac366552bfd2732\",\"order_id\":\"A-7\",\"outcome\":\"refunded\"}", "tool_call_id": "r1"}]', '{"call": {"id": "r1", "name": "refund", "arguments": {"order_id": "A-7", "amount_cents": 1500}}, "delta": 1, "exited": ["resolve.act"], "entered": ["resolve.think"], "outcome": "refunded", "result@": 1}', NULL, NULL, 14, 6, 3, 180, 60, 42, 16, 'vm:13032:276e633f#a748f637');
INSERT INTO public.event_rows VALUES (4294967313, 1796398319.879431, 'resolve.think', 'resolve.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 11, '[{"role": "assistant", "tool_calls": [{"id": "n3", "name": "next_state", "arguments": {"target": "check", "resolution": "refunded 1500"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["resolve.think"], "entered": ["resolve.act"]}', NULL, NULL, 15, 7, 3, 210, 70, 49, 16, 'vm:13032:276e633f#a748f637');
INSERT INTO public.event_rows VALUES (4294967314, 1796398319.8798897, 'resolve.act', 'check', 'go:check', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'resolve->check', NULL, NULL, 11, '[{"role": "tool", "content": "moved to ''check''", "tool_call_id": "n3"}]', '{"call": {"id": "n3", "name": "next_state", "arguments": {"target": "check", "resolution": "refunded 1500"}}, "delta": 1, "patch": {"resolution": "refunded 1500"}, "exited": ["resolve.act", "resolve"], "entered": ["check"], "result@": 1}', NULL, NULL, 16, 7, 3, 210, 70, 49, 16, 'vm:13032:276e633f#a748f637');
INSERT INTO public.event_rows VALUES (4294967315, 1796398319.880387, 'check', 'done', 'go:done', 'code', 'on record', NULL, NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'check->done', NULL, NULL, NULL, NULL, '{"patch": {"resolution": "verified: refunded 1500"}, "exited": ["check"], "entered": ["done"]}', NULL, NULL, 17, 7, 3, 210, 70, 49, 16, 'vm:13032:276e633f#a748f637');
INSERT INTO public.event_rows VALUES (8589934593, 1796398319.8870628, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "n1", "name": "next_state", "arguments": {"facts": "charged twice", "target": "research"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 'vm:13032:bed17524#a3016132');
INSERT INTO public.event_rows VALUES (8589934594, 1796398319.8875606, 'gather.act', 'research.dig.think', 'go:research', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'gather->research', NULL, NULL, 0, '[{"role": "tool", "content": "moved to ''research''", "tool_call_id": "n1"}]', '{"call": {"id": "n1", "name": "next_state", "arguments": {"facts": "charged twice", "target": "research"}}, "delta": 1, "patch": {"facts": "charged twice"}, "exited": ["gather.act", "gather"], "inputs": {"research": {"findings": null, "question": "B-9"}}, "entered": ["research", "research.dig", "research.dig.think"], "result@": 1}', NULL, NULL, 2, 1, 0, 30, 10, 7, 0, 'vm:13032:bed17524#a3016132');
INSERT INTO public.event_rows VALUES (8589934595, 1796398319.8881187, 'research.dig.think', 'research.dig.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2, '[{"role": "assistant", "tool_calls": [{"id": "n2", "name": "next_state", "arguments": {"target": "done", "findings": "one duplicate"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["research.dig.think"], "entered": ["research.dig.act"]}', NULL, NULL, 3, 2, 0, 60, 20, 14, 0, 'vm:13032:bed17524#a3016132');
INSERT INTO public.event_rows VALUES (8589934596, 1796398319.8885462, 'research.dig.act', 'resolve.think', 'go:research.done', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'research.dig->research.done', NULL, NULL, 2, '[{"role": "tool", "content": "moved to ''done''", "tool_call_id": "n2"}]', '{"call": {"id": "n2", "name": "next_state", "arguments": {"target": "done", "findings": "one duplicate"}}, "delta": 1, "patch": {"findings": "one duplicate"}, "scope": "research", "exited": ["research.dig.act", "research.dig", "research"], "entered": ["resolve", "resolve.think"], "outputs": {"research": {"findings": "one duplicate"}}, "result@": 1}', NULL, NULL, 4, 2, 0, 60, 20, 14, 0, 'vm:13032:bed17524#a3016132');
INSERT INTO public.event_rows VALUES (8589934597, 1796398319.889025, 'resolve.think', 'resolve.act', 'propose', 'model', NULL, 'refund', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 'r1', '756732e48346ebeb3223bee8942bb4f2', NULL, NULL, NULL, NULL, NULL, NULL, 4, '[{"role": "assistant", "tool_calls": [{"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}]}]', '{"delta": 1, "calls@": 1, "exited": ["resolve.think"], "entered": ["resolve.act"]}', 'resolve', '{"id":"r1","name":"refund","arguments":{"order_id":"B-9","amount_cents":500}}', 5, 3, 0, 90, 30, 21, 0, 'vm:13032:bed17524#a3016132');
INSERT INTO public.event_rows VALUES (8589934598, 1796398319.8895495, 'resolve.act', 'resolve.approve', 'ask', 'system', 'tool ''refund'' needs approval in state ''resolve''', 'refund', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{"call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}, "exited": ["resolve.act"], "entered": ["resolve.approve"]}', NULL, NULL, 6, 3, 0, 90, 30, 21, 0, 'vm:13032:bed17524#a3016132');
INSERT INTO public.event_rows VALUES (12884901895, 1796398319.895524, 'resolve.approve', 'resolve.think', 'rejected', 'human', 'rejected by ops: refund at most 100 cents', 'refund', NULL, NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 'ops', NULL, NULL, NULL, 'r1', NULL, 4, '[{"role": "tool", "content": "not executed: rejected by ops: refund at most 100 cents", "tool_call_id": "r1"}]', '{"call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}, "delta": 1, "exited": ["resolve.approve"], "entered": ["resolve.think"], "result@": 1}', NULL, NULL, 6, 3, 0, 90, 30, 21, 0, NULL);
INSERT INTO public.event_rows VALUES (12884901896, 1796398319.9021275, 'resolve.think', 'resolve.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 4, '[{"role": "assistant", "tool_calls": [{"id": "n3", "name": "next_state", "arguments": {"target": "failed"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["resolve.think"], "entered": ["resolve.act"]}', NULL, NULL, 7, 4, 0, 120, 40, 28, 0, 'vm:13032:634036b9#44ed3819');
INSERT INTO public.event_rows VALUES (12884901897, 1796398319.902702, 'resolve.act', 'failed', 'go:failed', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'resolve->failed', NULL, NULL, 4, '[{"role": "tool", "content": "moved to ''failed''", "tool_call_id": "n3"}]', '{"call": {"id": "n3", "name": "next_state", "arguments": {"target": "failed"}}, "delta": 1, "exited": ["resolve.act", "resolve"], "entered": ["failed"], "result@": 1}', NULL, NULL, 8, 4, 0, 120, 40, 28, 0, 'vm:13032:634036b9#44ed3819');
INSERT INTO public.event_rows VALUES (17179869191, 1796398319.908069, 'resolve.approve', 'resolve.act', 'approved', 'human', 'approved by ops: fine', 'refund', NULL, NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 'ops', NULL, NULL, NULL, NULL, NULL, NULL, NULL, '{"call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}, "exited": ["resolve.approve"], "entered": ["resolve.act"]}', NULL, NULL, 6, 3, 0, 90, 30, 21, 0, NULL);
INSERT INTO public.event_rows VALUES (21474836481, 1796398319.913605, 'gather.think', 'gather.think', 'reply', 'model', NULL, NULL, 'your reply in state ''gather'' called no tool; every reply must call one of the offered tools or next_state', NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "content": "The ledger may be down."}, {"role": "user", "content": "refused: your reply in state ''gather'' called no tool; every reply must call one of the offered tools or next_state"}]', '{"delta": 2, "result": "your reply in state ''gather'' called no tool; every reply must call one of the offered tools or next_state"}', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (21474836482, 1796398319.9143171, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'lookup', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "g0", "name": "lookup", "arguments": "{\"order_id\": "}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', NULL, NULL, 2, 2, 0, 60, 20, 14, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (21474836483, 1796398319.914843, 'gather.act', 'gather.think', 'refuse', 'model', NULL, 'lookup', 'arguments of ''lookup'' are not valid JSON (Expecting value); send a JSON object', NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "tool", "content": "refused: arguments of ''lookup'' are not valid JSON (Expecting value); send a JSON object", "tool_call_id": "g0"}]', '{"call": {"id": "g0", "name": "lookup", "arguments": "{\"order_id\": "}, "delta": 1, "exited": ["gather.act"], "entered": ["gather.think"], "result@": 1}', NULL, NULL, 3, 2, 0, 60, 20, 14, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (21474836484, 1796398319.915345, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'ledger', NULL, NULL, 1, 1, 0, 30, 10, 0, 0, 'g1', '44f1538a2ee8e5860d2f8a2e2dc1bb1f', NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "g1", "name": "ledger", "arguments": {"order_id": "D-1"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"], "usage_missing": true}', 'gather', '{"id":"g1","name":"ledger","arguments":{"order_id":"D-1"}}', 4, 3, 0, 90, 30, 14, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (21474836485, 1796398319.9158504, 'gather.act', 'gather.think', 'results', 'code', NULL, 'ledger', NULL, 'RuntimeError: ledger backend unavailable for D-1', 1, 0, 1, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, 'g1', NULL, 0, '[{"role": "tool", "content": "error: tool ''ledger'' failed: RuntimeError: ledger backend unavailable for D-1", "tool_call_id": "g1"}]', '{"call": {"id": "g1", "name": "ledger", "arguments": {"order_id": "D-1"}}, "delta": 1, "exited": ["gather.act"], "entered": ["gather.think"], "result@": 1}', NULL, NULL, 5, 3, 1, 90, 30, 14, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (21474836486, 1796398319.9163537, 'gather.think', 'gather.act', 'propose', 'model', 'the reply used 60000 input and 10 output tokens (900 micro-dollars), more than the worst case of its strict caps (579 estimated input, max_tokens 19301); level ''gather'' is spent', 'lookup', NULL, NULL, 1, 1, 0, 60000, 10, 900, 0, 'g2', 'c0a8d2be642af1f8085a70db29fbff66', NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "g2", "name": "lookup", "arguments": {"order_id": "D-1"}}]}]', '{"delta": 1, "breach": "gather:tokens", "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', 'gather', '{"id":"g2","name":"lookup","arguments":{"order_id":"D-1"}}', 6, 4, 1, 60090, 40, 914, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (21474836487, 1796398319.9172506, 'gather.act', 'failed', 'exhaust:gather', 'system', 'budget exhausted at gather:tokens; routed to ''failed''', NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, 'gather:tokens', NULL, 'g2', NULL, 0, '[{"role": "tool", "content": "not executed: an earlier call in the same reply was refused or is waiting", "tool_call_id": "g2"}]', '{"delta": 1, "exited": ["gather.act", "gather"], "entered": ["failed"]}', NULL, NULL, 6, 4, 1, 60090, 40, 914, 0, 'vm:13032:51c73345#613b3167');
INSERT INTO public.event_rows VALUES (30064771073, 1796398319.9273474, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'next_state', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, '[{"role": "assistant", "tool_calls": [{"id": "n1", "name": "next_state", "arguments": {"facts": "charged", "target": "research"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 'vm:13032:3a85f3b1#35173a7a');
INSERT INTO public.event_rows VALUES (30064771074, 1796398319.9278634, 'gather.act', 'research.dig.think', 'go:research', 'model', NULL, 'next_state', NULL, NULL, 1, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, NULL, 'gather->research', NULL, NULL, 0, '[{"role": "tool", "content": "moved to ''research''", "tool_call_id": "n1"}]', '{"call": {"id": "n1", "name": "next_state", "arguments": {"facts": "charged", "target": "research"}}, "delta": 1, "patch": {"facts": "charged"}, "exited": ["gather.act", "gather"], "inputs": {"research": {"findings": null, "question": "G-5"}}, "entered": ["research", "research.dig", "research.dig.think"], "result@": 1}', NULL, NULL, 2, 1, 0, 30, 10, 7, 0, 'vm:13032:3a85f3b1#35173a7a');
INSERT INTO public.event_rows VALUES (30064771075, 1796398319.928402, 'research.dig.think', 'research.dig.act', 'propose', 'model', NULL, 'search,search', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 's1', '110b28ffb1d5affccb6f12cde96089f4', NULL, NULL, NULL, NULL, NULL, NULL, 2, '[{"role": "assistant", "tool_calls": [{"id": "s1", "name": "search", "arguments": {"question": "G-5"}}, {"id": "s2", "name": "search", "arguments": {"question": "G-5 again"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["research.dig.think"], "entered": ["research.dig.act"]}', 'research.dig', '{"id":"s1","name":"search","arguments":{"question":"G-5"}}', 3, 2, 0, 60, 20, 14, 0, 'vm:13032:3a85f3b1#35173a7a');
INSERT INTO public.event_rows VALUES (30064771076, 1796398319.928938, 'research.dig.act', 'research.dig.act', 'next_call', 'code', NULL, 'search', NULL, NULL, 1, 0, 1, 0, 0, 0, 0, 's2', '43ec8b42e7b0992963e3882592ffcb80', NULL, 'e54e55c9b2062f6d0fff1be7', NULL, NULL, 's1', NULL, 2, '[{"role": "tool", "content": "notes about G-5: one duplicate charge", "tool_call_id": "s1"}]', '{"call": {"id": "s1", "name": "search", "arguments": {"question": "G-5"}}, "delta": 1, "exited": ["research.dig.act"], "entered": ["research.dig.act"], "result@": 1}', 'research.dig', '{"id":"s2","name":"search","arguments":{"question":"G-5 again"}}', 4, 2, 1, 60, 20, 14, 0, 'vm:13032:3a85f3b1#35173a7a');
INSERT INTO public.event_rows VALUES (34359738369, 1796398319.9530559, 'gather.think', 'gather.act', 'propose', 'model', NULL, 'lookup', NULL, NULL, 1, 1, 0, 30, 10, 7, 0, 'l1', 'b5d5d70822447ff1d7fa6d6112af9512', NULL, NULL, NULL, NULL, NULL, '9bfd23912edcfc00', 0, '[{"role": "assistant", "tool_calls": [{"id": "l1", "name": "lookup", "arguments": {"order_id": "F-3"}}]}]', '{"delta": 1, "calls@": 1, "exited": ["gather.think"], "entered": ["gather.act"]}', 'gather', '{"id":"l1","name":"lookup","arguments":{"order_id":"F-3"}}', 1, 1, 0, 30, 10, 7, 0, 'vm:13032:35d3e907#0474497e');
INSERT INTO public.event_rows VALUES (34359738370, 1796398319.953878, 'gather.act', 'gather.think', 'results', 'code', NULL, 'lookup', NULL, NULL, 1, 0, 1, 0, 0, 0, 1, NULL, NULL, NULL, '287c025b12f3ee4dd8f86a5c', NULL, NULL, 'l1', '808be597cd28301f', 0, '[{"role": "tool", "content": "{\"amount_cents\":2000,\"order_id\":\"F-3\",\"outcome\":\"hit\",\"status\":\"charged\"}", "tool_call_id": "l1"}]', '{"call": {"id": "l1", "name": "lookup", "arguments": {"order_id": "F-3"}}, "delta": 1, "exited": ["gather.act"], "entered": ["gather.think"], "outcome": "hit", "result@": 1}', NULL, NULL, 2, 1, 1, 30, 10, 7, 1, 'vm:13032:35d3e907#0474497e');
INSERT INTO public.event_rows VALUES (34359738371, 1796398319.9558222, 'gather.think', 'cancelled', 'cancel', 'human', 'a duplicate ticket', NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, 'ops', NULL, NULL, NULL, NULL, '9cfe73514e206f8e', NULL, NULL, '{"exited": ["gather.think", "gather"], "entered": ["cancelled"]}', NULL, NULL, 2, 1, 1, 30, 10, 7, 1, NULL);


--
-- Data for Name: intent_rows; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.intent_rows VALUES ('v01-rejected', 6, 'r1', 'resolve', 'refund', '{"id":"r1","name":"refund","arguments":{"order_id":"B-9","amount_cents":500}}', '756732e48346ebeb3223bee8942bb4f2');
INSERT INTO public.intent_rows VALUES ('v01-approved', 6, 'r1', 'resolve', 'refund', '{"id":"r1","name":"refund","arguments":{"order_id":"B-9","amount_cents":500}}', '756732e48346ebeb3223bee8942bb4f2');
INSERT INTO public.intent_rows VALUES ('v01-fork', 1, 'l1', 'gather', 'lookup', '{"id":"l1","name":"lookup","arguments":{"order_id":"A-7"}}', '77a61a50e83c77fa20c8b822a1bc8af2');


--
-- Data for Name: leases; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (1, 'v01-done', 'vm:13032:955ba9c2#cb836495', 1796398319.839249, 0, NULL, 1796398319.871786, true);
INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (2, 'v01-done', 'vm:13032:276e633f#a748f637', 1796398319.874899, 14, NULL, 1796398319.88224, true);
INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (3, 'v01-waiting', 'vm:13032:bed17524#a3016132', 1796398319.884229, 0, NULL, 1796398319.891489, true);
INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (4, 'v01-rejected', 'vm:13032:634036b9#44ed3819', 1796398319.89759, 7, NULL, 1796398319.904929, true);
INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (5, 'v01-exhausted', 'vm:13032:51c73345#613b3167', 1796398319.911231, 0, NULL, 1796398319.918963, true);
INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (6, 'v01-killed', 'vm:13032:3a85f3b1#35173a7a', 1796398319.924607, 0, NULL, 1796398319.930643, false);
INSERT INTO public.leases OVERRIDING SYSTEM VALUE VALUES (7, 'v01-cancelled', 'vm:13032:35d3e907#0474497e', 1796398319.949966, 0, NULL, 1796398319.955139, true);


--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (3, 'v01-rejected', 'v01', 'ended', 'failed', 9, '{"seq": 9, "chart": "v01", "model": "scripted", "state": "failed", "ledger": {"root": {"steps": 8, "cost_micros": 28, "model_calls": 4, "input_tokens": 120, "output_tokens": 40}, "gather": {"steps": 2, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "reason": "ended in ''failed''", "run_id": "v01-rejected", "status": "ended", "visits": {"failed": 1, "gather": 1, "resolve": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged twice", "findings": "one duplicate", "order_id": "B-9", "resolution": null}, "created_at": 1796398319.8919015, "parent_run": "v01-waiting", "parent_seq": 6, "traversals": {"resolve->failed": 1}, "lineage_root": "v01-waiting", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, 7, '2ac49a1c-fa8f-49ac-b738-493756dcd9a2/pid:[4026531836]/13032/491709', 'd8bd3aaa7d7f799e', true, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (4, 'v01-approved', 'v01', 'running', 'resolve.act', 7, '{"seq": 7, "chart": "v01", "model": "scripted", "state": "resolve.act", "visit": {"seq": 4, "state": "resolve", "iterations": 1}, "ledger": {"root": {"steps": 6, "cost_micros": 21, "model_calls": 3, "input_tokens": 90, "output_tokens": 30}, "gather": {"steps": 2, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "run_id": "v01-approved", "visits": {"gather": 1, "resolve": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged twice", "findings": "one duplicate", "order_id": "B-9", "resolution": null}, "pending": [{"key": "756732e48346ebeb3223bee8942bb4f2", "call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}, "approved_by": "ops"}], "created_at": 1796398319.905355, "parent_run": "v01-waiting", "parent_seq": 6, "lineage_root": "v01-waiting", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, NULL, NULL, 'd8bd3aaa7d7f799e', true, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (5, 'v01-exhausted', 'v01', 'ended', 'failed', 7, '{"seq": 7, "chart": "v01", "model": "scripted", "state": "failed", "ledger": {"root": {"steps": 6, "tool_calls": 1, "cost_micros": 914, "model_calls": 4, "input_tokens": 60090, "output_tokens": 40}, "gather": {"steps": 6, "tool_calls": 1, "cost_micros": 914, "model_calls": 4, "input_tokens": 60090, "output_tokens": 40}}, "reason": "ended in ''failed''", "routed": 1, "run_id": "v01-exhausted", "status": "ended", "visits": {"failed": 1, "gather": 1}, "context": {"facts": null, "findings": null, "order_id": "D-1", "resolution": null}, "breached": {"gather": "tokens"}, "created_at": 1796398319.910236, "lineage_root": "v01-exhausted", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, 0, '2ac49a1c-fa8f-49ac-b738-493756dcd9a2/pid:[4026531836]/13032/491709', 'd8bd3aaa7d7f799e', false, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (6, 'v01-fork', 'v01', 'running', 'gather.act', 1, '{"seq": 1, "chart": "v01", "doubt": "l1", "model": "scripted", "state": "gather.act", "visit": {"seq": 0, "state": "gather", "iterations": 1}, "ledger": {"root": {"steps": 1, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}, "gather": {"steps": 1, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "run_id": "v01-fork", "visits": {"gather": 1}, "context": {"facts": null, "findings": null, "order_id": "A-7", "resolution": null}, "pending": [{"key": "77a61a50e83c77fa20c8b822a1bc8af2", "call": {"id": "l1", "name": "lookup", "arguments": {"order_id": "A-7"}}}, {"call": {"id": "l2", "name": "lookup", "arguments": {"order_id": "A-7"}}}], "created_at": 1796398319.9202437, "parent_run": "v01-done", "parent_seq": 1, "lineage_root": "v01-done", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, NULL, NULL, 'd8bd3aaa7d7f799e', false, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (7, 'v01-killed', 'v01', 'running', 'research.dig.act', 4, '{"seq": 4, "chart": "v01", "model": "scripted", "state": "research.dig.act", "visit": {"seq": 2, "calls": {"search": 1}, "state": "research.dig", "succeeded": {"search": 1}, "iterations": 1}, "ledger": {"root": {"steps": 4, "tool_calls": 1, "cost_micros": 14, "model_calls": 2, "input_tokens": 60, "output_tokens": 20}, "gather": {"steps": 2, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "run_id": "v01-killed", "visits": {"gather": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged", "findings": null, "order_id": "G-5", "resolution": null}, "pending": [{"key": "43ec8b42e7b0992963e3882592ffcb80", "call": {"id": "s2", "name": "search", "arguments": {"question": "G-5 again"}}}], "contexts": {"research": {"findings": null, "question": "G-5"}}, "created_at": 1796398319.9233856, "lineage_root": "v01-killed", "chart_version": "d8bd3aaa7d7f799e"}', 'vm:13032:3a85f3b1#35173a7a', 0, 0, '2ac49a1c-fa8f-49ac-b738-493756dcd9a2/pid:[4026531836]/13032/491709', 'd8bd3aaa7d7f799e', false, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (1, 'v01-done', 'v01', 'ended', 'done', 19, '{"seq": 19, "chart": "v01", "model": "scripted:second", "state": "done", "ledger": {"root": {"steps": 17, "wall_ms": 16, "tool_calls": 3, "cost_micros": 49, "model_calls": 7, "input_tokens": 210, "output_tokens": 70}, "gather": {"steps": 7, "wall_ms": 1, "tool_calls": 1, "cost_micros": 21, "model_calls": 3, "input_tokens": 90, "output_tokens": 30}}, "reason": "ended in ''done''", "run_id": "v01-done", "status": "ended", "visits": {"done": 1, "check": 1, "gather": 1, "resolve": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged twice", "findings": "a duplicate", "order_id": "A-7", "resolution": "verified: refunded 1500"}, "created_at": 1796398319.837531, "lineage_root": "v01-done", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, 14, '2ac49a1c-fa8f-49ac-b738-493756dcd9a2/pid:[4026531836]/13032/491709', 'd8bd3aaa7d7f799e', true, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (2, 'v01-waiting', 'v01', 'waiting', 'resolve.approve', 6, '{"seq": 6, "chart": "v01", "model": "scripted", "state": "resolve.approve", "visit": {"seq": 4, "state": "resolve", "iterations": 1}, "ledger": {"root": {"steps": 6, "cost_micros": 21, "model_calls": 3, "input_tokens": 90, "output_tokens": 30}, "gather": {"steps": 2, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "reason": "tool ''refund'' needs approval in state ''resolve''", "run_id": "v01-waiting", "status": "waiting", "visits": {"gather": 1, "resolve": 1, "research": 1, "research.dig": 1}, "context": {"facts": "charged twice", "findings": "one duplicate", "order_id": "B-9", "resolution": null}, "pending": [{"key": "756732e48346ebeb3223bee8942bb4f2", "call": {"id": "r1", "name": "refund", "arguments": {"order_id": "B-9", "amount_cents": 500}}}], "created_at": 1796398319.883042, "lineage_root": "v01-waiting", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, 0, '2ac49a1c-fa8f-49ac-b738-493756dcd9a2/pid:[4026531836]/13032/491709', 'd8bd3aaa7d7f799e', false, 0, 0, NULL, false);
INSERT INTO public.runs OVERRIDING SYSTEM VALUE VALUES (8, 'v01-cancelled', 'v01', 'ended', 'cancelled', 3, '{"seq": 3, "chart": "v01", "model": "scripted", "state": "cancelled", "trace": {"traceparent": "00-0752f6020182c26b1960f3aaba60b257-1929f8239926c4db-03"}, "ledger": {"root": {"steps": 2, "wall_ms": 1, "tool_calls": 1, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}, "gather": {"steps": 2, "wall_ms": 1, "tool_calls": 1, "cost_micros": 7, "model_calls": 1, "input_tokens": 30, "output_tokens": 10}}, "reason": "cancelled: a duplicate ticket", "run_id": "v01-cancelled", "status": "ended", "visits": {"gather": 1, "cancelled": 1}, "context": {"facts": null, "findings": null, "order_id": "F-3", "resolution": null}, "created_at": 1796398319.9489276, "lineage_root": "v01-cancelled", "chart_version": "d8bd3aaa7d7f799e"}', NULL, 0, 0, '2ac49a1c-fa8f-49ac-b738-493756dcd9a2/pid:[4026531836]/13032/491709', 'd8bd3aaa7d7f799e', false, 0, 0, NULL, false);


--
-- Data for Name: statechart_schema; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.statechart_schema VALUES (1);
INSERT INTO public.statechart_schema VALUES (2);


--
-- Name: leases_n_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.leases_n_seq', 7, true);


--
-- Name: runs_num_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.runs_num_seq', 8, true);


--
-- Name: bases bases_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.bases
    ADD CONSTRAINT bases_pkey PRIMARY KEY (run_id, seq);


--
-- Name: charts charts_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.charts
    ADD CONSTRAINT charts_pkey PRIMARY KEY (version);


--
-- Name: event_rows event_rows_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.event_rows
    ADD CONSTRAINT event_rows_pkey PRIMARY KEY (id);


--
-- Name: leases leases_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.leases
    ADD CONSTRAINT leases_pkey PRIMARY KEY (run_id, holder);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (num);


--
-- Name: runs runs_run_id_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_run_id_key UNIQUE (run_id);


--
-- Name: runs_by_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_by_status ON public.runs USING btree (status, chart);


--
-- Name: runs_runnable; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_runnable ON public.runs USING btree (num) WHERE ((status = 'running'::text) AND (NOT blocked));


--
-- PostgreSQL database dump complete
--


