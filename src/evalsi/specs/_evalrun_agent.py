"""The agent's keys of an EvalRun (``spec.target.agent.harness``, ``spec.environment``: tools,
sandbox, fixtures, checkers), checked as ``_evalrun_load`` checks the rest: every problem
collected with its line, none raised on the first."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalsi.specs._agent_kinds import (
    AGENT_KINDS,
    A2aAgentSpec,
    AgentKind,
    CliAgentSpec,
    GitWorkspaceSpec,
    HttpAgentSpec,
    McpAgentSpec,
    ResponsesAgentSpec,
    UserSimulatorSpec,
)
from evalsi.specs._checks import show
from evalsi.specs._evalrun import (
    CheckerSpec,
    EnvironmentSpec,
    HarnessSpec,
    SandboxSettingsSpec,
    ToolDeclarationSpec,
    ToolEntrySpec,
    fixture_problem,
    path_problem,
)
from evalsi.specs._yaml import KeyPath

PY_REF = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
URL = re.compile(r"https?://\S+")
GRPC_ADDRESS = re.compile(r"unix:/[^\s\0]+|(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}")


class AgentKeys:
    """The agent's keys; mixed into the EvalRun builder, which supplies ``bad``."""

    base_dir: Path
    lines: Mapping[KeyPath, int]

    def bad(self, path: KeyPath, message: str) -> None:
        raise NotImplementedError

    def endpoint(self, at: KeyPath, m: dict[str, Any]) -> tuple[str, str]:
        raise NotImplementedError

    def provider(self, at: KeyPath, m: dict[str, Any], base_url: str) -> tuple[str, str, str]:
        raise NotImplementedError

    def secret(self, at: KeyPath, ref: str) -> str:
        raise NotImplementedError

    def agent_kind(self, at: KeyPath, a: dict[str, Any]) -> tuple[AgentKind, dict[str, Any]]:
        """``kind`` (given, or the one connector section present) and that section, built:
        ``{"a2a": A2aAgentSpec(...)}`` and so on; ``{}`` for the built-in agent."""
        given = [k for k in AGENT_KINDS[1:] if k in a]
        kind = a.get("kind") or (given[0] if given else "builtin")
        if len(given) > 1:
            self.bad(at, f"set one agent section, not {' and '.join(given)}")
            return kind, {}
        if kind == "builtin":
            if given:
                self.bad((*at, "kind"), f"kind builtin takes no {given[0]} section")
            return kind, {}
        if given != [kind]:
            self.bad(at, f"kind {kind} needs its section: {kind}: {{...}}")
            return kind, {}
        for key in ("model", "harness"):
            if key in a:
                self.bad((*at, key), f"a {kind} agent brings its own model; remove {key}")
        section, where = a[kind], (*at, kind)
        build = getattr(self, f"_{kind}_agent")
        return kind, {kind: build(where, section)}

    def _headers(self, at: KeyPath, headers: dict[str, str]) -> dict[str, str]:
        return {
            k: self.secret((*at, k), v) if v.startswith(("env:", "file:")) else v
            for k, v in headers.items()
        }

    def _a2a_agent(self, at: KeyPath, s: dict[str, Any]) -> A2aAgentSpec:
        return A2aAgentSpec(
            url=s["url"],
            headers=self._headers((*at, "headers"), dict(s.get("headers", {}))),
            stream=bool(s.get("stream", True)),
        )

    def _mcp_agent(self, at: KeyPath, s: dict[str, Any]) -> McpAgentSpec:
        command, url = tuple(s.get("command", ())), s.get("url", "")
        if bool(command) == bool(url):
            self.bad(at, "set one of command (argv, stdio) or url (streamable HTTP)")
        elif command and not command[0].strip():
            self.bad((*at, "command"), "the command's first item (the program) is empty")
        tool, prompt = s.get("tool", ""), s.get("prompt", "")
        if bool(tool) == bool(prompt):
            self.bad(at, "set one of tool (the tool that is the agent) or prompt")
        return McpAgentSpec(
            command=command,
            url=url,
            tool=tool,
            prompt=prompt,
            input_argument=s.get("inputArgument") or "input",
            arguments=dict(s.get("arguments", {})),
            env=dict(s.get("env", {})),
            cwd=str(self.base_dir),
        )

    def _responses_agent(self, at: KeyPath, s: dict[str, Any]) -> ResponsesAgentSpec:
        base_url, secret = self.endpoint(at, {**s, "connector": "responses"})
        return ResponsesAgentSpec(
            base_url=base_url,
            model=s["model"],
            secret_ref=secret,
            instructions=s.get("instructions", ""),
            params=dict(s.get("params", {})),
            max_turns=int(s.get("maxTurns", 10)),
        )

    def _http_agent(self, at: KeyPath, s: dict[str, Any]) -> HttpAgentSpec:
        from evalsi.connectors import JsonPath

        for key in ("output", "transcript", "session"):
            if s.get(key):
                try:
                    JsonPath(s[key])
                except ValueError as e:
                    self.bad((*at, key), f"not a JSONPath: {e}")
        if not (s.get("output") or s.get("transcript")):
            self.bad(at, "set output (a JSONPath to the answer), transcript, or both")
        return HttpAgentSpec(
            url=s["url"],
            method=s.get("method", "POST"),
            headers=self._headers((*at, "headers"), dict(s.get("headers", {}))),
            body=s.get("body", ""),
            output=s.get("output", ""),
            transcript=s.get("transcript", ""),
            session=s.get("session", ""),
        )

    def _cli_agent(self, at: KeyPath, s: dict[str, Any]) -> CliAgentSpec:
        command = tuple(s["command"])
        if not command[0].strip():
            self.bad((*at, "command"), "the first item (the program) is empty")
        commands_file = s.get("commandsFile") or ".evalsi/commands.jsonl"
        problem = path_problem(commands_file)
        if problem:
            self.bad((*at, "commandsFile"), f"{problem}, got {show(commands_file)}")
        return CliAgentSpec(
            command=command,
            env=dict(s.get("env", {})),
            commands_file=commands_file,
            timeout_s=float(s.get("timeoutSeconds", 600.0)),
        )

    def user_simulator(self, at: KeyPath, u: dict[str, Any]) -> UserSimulatorSpec | None:
        m = u.get("model")
        if m is None:
            self.bad(at, "missing required field 'model' (the simulator's model)")
            return None
        base_url, secret, api_version, region, auth = "", "", "", "", ""
        if m.get("connector") != "scripted":
            base_url, secret = self.endpoint((*at, "model"), m)
            api_version, region, auth = self.provider((*at, "model"), m, base_url)
        max_usd = u.get("maxUsd")
        return UserSimulatorSpec(
            connector=m["connector"],
            model=m["model"],
            base_url=base_url,
            params=dict(m.get("params", {})),
            secret_ref=secret,
            persona=u.get("persona", ""),
            goal=u.get("goal", ""),
            hidden=u.get("hidden", ""),
            stop_token=u.get("stopToken") or "###STOP###",
            max_turns=int(u.get("maxTurns", 10)),
            max_usd=float(max_usd) if max_usd is not None else None,
            api_version=api_version,
            region=region,
            auth=auth,
        )

    def repository(self, at: KeyPath, r: dict[str, Any]) -> GitWorkspaceSpec:
        path = Path(r["path"]).expanduser()
        if not path.is_absolute():
            path = self.base_dir / path
        if not (path / ".git").exists() and not (path / "HEAD").is_file():
            self.bad((*at, "path"), f"not a git repository: {path}")
        return GitWorkspaceSpec(path=str(path), commit=r.get("commit") or "HEAD")

    def harness(self, at: KeyPath, h: dict[str, Any]) -> HarnessSpec:
        if "python" in h:
            ref = h["python"]
            if not PY_REF.fullmatch(ref):
                self.bad((*at, "python"), f"expected module:Class, got {show(ref)}")
            return HarnessSpec(python=ref)
        if "grpc" in h:
            address = h["grpc"]
            if not GRPC_ADDRESS.fullmatch(address):
                self.bad(
                    (*at, "grpc"),
                    "expected unix:/path/to.sock or 127.0.0.1:PORT (local only), "
                    f"got {show(address)}",
                )
            return HarnessSpec(grpc=address)
        if "command" not in h:
            self.bad(at, "set one of python (module:Class), grpc (an address) or command (argv)")
            return HarnessSpec(python="-")
        c = h["command"]
        argv = tuple(c["argv"])
        if not argv[0].strip():
            self.bad((*at, "command", "argv"), "the first item (the program) is empty")
        return HarnessSpec(
            argv=argv,
            env=dict(c.get("env", {})),
            start_timeout_s=float(c.get("startTimeoutSeconds", 30.0)),
            cwd=str(self.base_dir),
        )

    def environment(self, e: dict[str, Any]) -> EnvironmentSpec:
        at: KeyPath = ("spec", "environment")
        tools = tuple(self.tool((*at, "tools", i), t) for i, t in enumerate(e.get("tools", ())))
        seen: dict[str, int] = {}
        for i, t in enumerate(tools):
            for name in t.sandbox:
                if name in seen:
                    self.bad(
                        (*at, "tools", i, "sandbox"),
                        f"sandbox tool {name!r} is listed in tools[{seen[name]}] too",
                    )
                seen.setdefault(name, i)
        sandbox = None
        if "sandbox" in e:
            sb = e["sandbox"]
            memory = sb.get("memoryMb")
            sandbox = SandboxSettingsSpec(
                min_isolation=sb.get("minIsolation", "namespaced"),
                network=sb.get("network", "deny"),
                timeout_s=float(sb.get("timeoutSeconds", 30.0)),
                memory_mb=int(memory) if memory is not None else None,
            )
        policy = e.get("policy", {})
        approvals = policy.get("approvals", {})
        return EnvironmentSpec(
            tools=tools,
            allow=frozenset(policy.get("allow", ())),
            deny=frozenset(policy.get("deny", ())),
            allow_destructive=bool(policy.get("allowDestructive", False)),
            read_only=bool(policy.get("readOnly", False)),
            default=policy.get("default", "allow"),
            approvals_mode=approvals.get("mode", "deny"),
            approved=frozenset(approvals.get("allow", ())),
            faults=tuple(
                {
                    "tool": f["tool"],
                    "kind": f["kind"],
                    "call": f.get("call"),
                    "latency_ms": float(f.get("latencyMs", 0.0)),
                    "message": f.get("message", ""),
                }
                for f in e.get("faults", ())
            ),
            injections=tuple(
                {"tool": i["tool"], "payload": i["payload"], "call": i.get("call")}
                for i in e.get("injections", ())
            ),
            tool_timeout_s=float(e.get("toolTimeoutSeconds", 30.0)),
            sandbox=sandbox,
            fixtures=self.fixtures((*at, "fixtures"), e.get("fixtures")),
            checkers=tuple(
                self.checker((*at, "checkers", i), c) for i, c in enumerate(e.get("checkers", ()))
            ),
            repository=(
                self.repository((*at, "repository"), e["repository"]) if "repository" in e else None
            ),
        )

    def fixtures(self, at: KeyPath, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        problem = fixture_problem(value)
        if problem:
            self.bad(at, problem)
            return {}
        return dict(value["files"])

    def checker(self, at: KeyPath, c: dict[str, Any]) -> CheckerSpec:
        kinds = [k for k in ("exitCode", "jsonFile", "python") if k in c]
        if len(kinds) != 1:
            self.bad(at, "set exactly one of exitCode, jsonFile or python")
            return CheckerSpec(kind="python", name="")
        if "python" in c:
            ref = c["python"]
            if not PY_REF.fullmatch(ref):
                self.bad((*at, "python"), f"expected module:function, got {show(ref)}")
            return CheckerSpec(kind="python", name=c.get("name") or ref, function=ref)
        if "exitCode" in c:
            x = c["exitCode"]
            command = tuple(x["command"])
            return CheckerSpec(
                kind="exit_code",
                name=c.get("name") or f"exit_code {' '.join(command)}"[:120],
                command=command,
                expect=int(x.get("expect", 0)),
            )
        j = c["jsonFile"]
        problem = path_problem(j["path"])
        if problem:
            self.bad((*at, "jsonFile", "path"), f"{problem}, got {show(j['path'])}")
        source = j.get("expectFrom", "")
        if ("expect" in j) == bool(source):
            self.bad((*at, "jsonFile"), "set one of expect (a value) or expectFrom")
        elif source and not (source == "reference" or source.startswith("metadata.")):
            self.bad(
                (*at, "jsonFile", "expectFrom"),
                f"expected reference or metadata.KEY, got {show(source)}",
            )
        return CheckerSpec(
            kind="json_file",
            name=c.get("name") or f"json_file {j['path']}",
            path=j["path"],
            expect=j.get("expect"),
            expect_from=source,
        )

    def tool(self, at: KeyPath, t: dict[str, Any]) -> ToolEntrySpec:
        kinds = [k for k in ("mcp", "function", "sandbox") if k in t]
        if len(kinds) != 1:
            self.bad(
                at,
                "set one of mcp (an MCP server), function (module:function) or sandbox "
                "(sandbox tools)",
            )
            return ToolEntrySpec()
        if "sandbox" in t:
            if "declare" in t:
                self.bad((*at, "declare"), "sandbox tools are declared by evalsi")
            names = tuple(t["sandbox"]["tools"])
            if len(set(names)) != len(names):
                self.bad((*at, "sandbox", "tools"), "a sandbox tool is listed twice")
            return ToolEntrySpec(sandbox=names)
        if "function" in t:
            ref = t["function"]
            if not PY_REF.fullmatch(ref):
                self.bad((*at, "function"), f"expected module:function, got {show(ref)}")
            declared = {ref.rpartition(":")[2].rpartition(".")[2]: _declared(t.get("declare", {}))}
            return ToolEntrySpec(function=ref, declared=declared)
        if "declare" in t:
            self.bad((*at, "declare"), "declare an MCP server's tools under mcp.tools, by name")
        m = t["mcp"]
        command, url = tuple(m.get("command", ())), m.get("url", "")
        if bool(command) == bool(url):
            self.bad((*at, "mcp"), "set one of command (argv, stdio) or url (streamable HTTP)")
        elif url and not URL.fullmatch(url):
            self.bad((*at, "mcp", "url"), f"expected an http:// or https:// URL, got {show(url)}")
        elif command and not command[0].strip():
            self.bad((*at, "mcp", "command"), "the command's first item (the program) is empty")
        return ToolEntrySpec(
            command=command,
            url=url,
            env=dict(m.get("env", {})),
            declared={name: _declared(d) for name, d in m.get("tools", {}).items()},
        )


def _declared(d: dict[str, Any]) -> ToolDeclarationSpec:
    return ToolDeclarationSpec(
        permission=d.get("permission"),
        data_class=d.get("dataClass"),
        reversible=d.get("reversible"),
        exposure=d.get("exposure"),
    )


__all__ = ["GRPC_ADDRESS", "PY_REF", "URL", "AgentKeys"]
