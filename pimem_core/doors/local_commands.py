"""The handlers of the commands only the command line runs: what a directory resolves to,
an index run, the other front doors (``pimem serve``, the memory service), maintenance, the
snapshot, and the plugins.

Declared in the command table (:mod:`pimem_core.doors.table`), as the memory commands are.
"""

from __future__ import annotations

import time

from pimem_core.command_table import Args, Outcome
from pimem_core.doors.commands import plugin_commands
from pimem_core.doors.front_door import FrontDoor, in_front_door
from pimem_core.manager import shown_setting


@in_front_door
def scope(door: FrontDoor, a: Args) -> Outcome:
    fields = door.scope().to_json()
    text = "\n".join(
        f"{key}: {'(none)' if value is None else value}" for key, value in fields.items()
    )
    return Outcome(text=text, data=fields)


@in_front_door
def index(door: FrontDoor, a: Args) -> Outcome:
    scope = door.scope()
    report = door.pimem.index_memory(scope, "cli", on_wait=door.on_wait, progress=door.progress)
    failed = "".join(f"\n  failed: {f.text}" for f in report.failed_files)
    if report.total_files == 0 and not report.failed_files:
        text = f"no memory yet in {scope.memory_dir}; nothing to index: write or capture something first"
    else:
        # memsearch counts the chunks it embedded, not the ones it dropped: say what it did.
        text = (
            f"{report.total_files} file(s) of {scope.memory_dir} checked, "
            f"{report.indexed_chunks} new chunk(s) embedded into {scope.collection}"
        )
        text += (
            f"; {len(report.failed_files)} file(s) failed:{failed}"
            if failed
            else "; the collection matches the files"
        )
    data = {
        "collection": scope.collection,
        "indexed_chunks": report.indexed_chunks,
        "total_files": report.total_files,
        "failed_files": [f.to_json() for f in report.failed_files],
    }
    return Outcome(text=text, data=data)


@in_front_door
def serve(door: FrontDoor, a: Args) -> Outcome:
    door.serve_host()
    return Outcome(text=None)


@in_front_door
def maintenance(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.runtime.maintenance import MaintenanceRunner

    runner = MaintenanceRunner(door.pimem, door.scope(), budget=door.budget())
    reports = runner.run_due(force=a["force"])
    lines = [
        f"{report.name}: {report.result}" + (f" ({report.detail})" if report.detail else "")
        for report in reports
    ]
    return Outcome(
        text="\n".join(lines) or "No maintenance tasks: no plugin provides one.",
        data=[report.to_json() for report in reports],
    )


@in_front_door
def service_run(door: FrontDoor, a: Args) -> Outcome:
    door.run_service()
    return Outcome(text=None)


@in_front_door
def service_status(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.doors import service_client
    from pimem_core.doors.service_wire import socket_path

    own = socket_path()
    services = service_client.every_service()
    lines = [service_client.describe()]
    listed = []
    for running in services:
        hello, mine = running.hello, running.path == own
        uptime = max(0, int(time.time() - hello.started))
        if not mine:
            apart = ", ".join(running.differences()) or "the same settings, another installation"
            lines.append(
                f"also running, for other settings: pid {hello.pid}, up {uptime} s ({apart})"
            )
        listed.append(
            {
                "pid": hello.pid,
                "version": hello.version,
                "started": hello.started,
                "socket": str(running.path),
                "this_environment": mine,
                "differences": [] if mine else running.differences(),
            }
        )
    here = next((item for item in listed if item["this_environment"]), None)
    return Outcome(
        text="\n".join(lines),
        data={
            "running": here is not None,
            **(
                {}
                if here is None
                else {"pid": here["pid"], "version": here["version"], "started": here["started"]}
            ),
            "services": listed,
        },
    )


@in_front_door
def service_stop(door: FrontDoor, a: Args) -> Outcome:
    from pimem_core.doors import service_client
    from pimem_core.doors.service_wire import socket_path

    if a["all"]:
        stopped = []
        for running in service_client.every_service():
            found = service_client.probe(running.path)
            if found is not None:
                service_client.stop(found, running.path)
                stopped.append(running.hello.pid)
        text = (
            f"stopped {len(stopped)} memory service(s) (pid {', '.join(map(str, stopped))})"
            if stopped
            else "no memory service is running"
        )
        return Outcome(text=text, data={"stopped": stopped})
    path = socket_path()
    found = service_client.probe(path)
    if found is None:
        others = len(service_client.every_service())
        more = (
            f"; {others} started with other settings run (`pimem service status`, `--all`)"
            if others
            else ""
        )
        return Outcome(
            text=f"no memory service is running for this environment{more}", data={"stopped": None}
        )
    pid = found.hello.pid
    service_client.stop(found, path)
    return Outcome(text=f"stopped the memory service (pid {pid})", data={"stopped": pid})


@in_front_door
def snapshot(door: FrontDoor, a: Args) -> Outcome:
    snapshot = door.pimem.build_snapshot(door.scope())
    if snapshot is None:
        door.note(
            "no stable snapshot: no plugin builds one (PI_MEMSEARCH_SNAPSHOT=off, or the "
            "plugin is blocked; see `pimem plugins`)"
        )
        return Outcome(text=None)
    return Outcome(text=snapshot.removesuffix("\n"))  # printed with one newline


@in_front_door
def plugins(door: FrontDoor, a: Args) -> Outcome:
    records = door.pimem.pm.records
    answers = door.pimem.pm.answering_plugins()
    rows = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS")]
    for record in records:
        hooks = ", ".join(
            hook.removeprefix("pimem_")
            + (" (only when chosen)" if hook in record.only_when_chosen else "")
            for hook in record.hooks
        )
        detail = record.error if record.error else hooks
        rows.append(
            (
                record.name,
                record.distribution or "-",
                record.version or "-",
                record.status_text,
                detail,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
        + "  "
        + row[4]
        for row in rows
    ]
    groups = door.pimem.pm.groups
    if groups:
        lines += ["", "plugin groups (a name PIMEM_USE and PIMEM_DISABLE_PLUGINS take):"]
        lines += [f"  {group.text}" for group in groups]
    declared = [record for record in records if record.settings]
    if declared:
        lines += ["", "plugin settings (environment variable = current value):"]
    for record in declared:
        lines.append(f"  {record.name}:")
        lines += [
            f"    {value.env}={shown_setting(value.value)}  ({value.help}; default "
            f"{shown_setting(value.default)})"
            for value in record.settings
        ]
    settings = door.pimem.pm.settings
    statuses = {record.name: record.status_text for record in records}
    lines += ["", "single-answer hooks (the plugin asked first):"]
    for hook, plugin in answers.items():
        choice = settings.choice(hook)
        if choice is None:
            why = ""
        elif choice.plugin == plugin:
            why = f"  (chosen: {choice.setting})"
        else:  # chosen but not active: the default answers (docs/plugin-hooks.md)
            status = statuses.get(choice.plugin, "not loaded")
            why = f"  ({choice.setting}: {choice.plugin} is {status})"
        lines.append(f"  {hook} -> {plugin or '(none)'}{why}")
    contested = door.pimem.pm.contested_hooks()
    if contested:
        lines.append("")
    lines += [f"warning: {hook.text}" for hook in contested]
    failed = door.pimem.pm.failed
    lines += ["", *(f"warning: {record.failure}" for record in failed)] if failed else []
    added = plugin_commands(door.pimem)
    if added.added or added.left_out:
        lines += ["", "commands added by plugins:"]
        lines += [
            f"  pimem {command.name}  ({plugin}"
            + (f"; served as {command.method}" if command.method else "")
            + f"): {command.help}"
            for plugin, command in added.added
        ]
        lines += [
            f"  warning: pimem {name} of {plugin} is left out: {why}"
            for plugin, name, why in added.left_out
        ]
    return Outcome(
        text="\n".join(line.rstrip() for line in lines),
        data={
            "plugins": [record.to_json() for record in records],
            "groups": [group.to_json() for group in groups],
            "single_answer_hooks": answers,
            "commands": [
                {"command": command.name, "plugin": plugin, "method": command.method}
                for plugin, command in added.added
            ],
            "commands_left_out": [
                {"command": name, "plugin": plugin, "why": why}
                for plugin, name, why in added.left_out
            ],
            "chosen": [choice.to_json() for choice in settings.chosen_plugins],
            "warnings": [hook.to_json() for hook in contested],
        },
    )
