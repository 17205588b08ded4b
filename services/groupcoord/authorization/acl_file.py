"""ACL bindings from a file (a ConfigMap in Kubernetes), re-read when it changes.

The file is JSON in Kafka's vocabulary::

    {"superUsers": ["User:admin"],
     "allowEveryoneIfNoAclFound": false,
     "acls": [{"principal": "User:alice", "host": "*", "operation": "READ",
               "permissionType": "ALLOW", "resourceType": "GROUP",
               "patternType": "PREFIXED", "resourceName": "app-"}]}

A policy that cannot be read keeps the previous one in force (logged), so a bad edit never
opens or closes everything; at startup a bad file is an error.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from groupcoord.authorization.acls import AclBinding, AclError, Authorizer

log = logging.getLogger(__name__)

ENV_FILE = "GROUPCOORD_ACL_FILE"
ENV_SUPER_USERS = "GROUPCOORD_SUPER_USERS"
ENV_SOURCE = "GROUPCOORD_ACL_SOURCE"
ENV_ALLOW_EVERYONE = "GROUPCOORD_ALLOW_EVERYONE_IF_NO_ACL_FOUND"
CHECK_INTERVAL_S = 2.0


def parse_policy(raw: Any, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> Authorizer:
    """The policy of a parsed ACL document; its ``allowEveryoneIfNoAclFound`` overrides the
    configured default (``--allow-everyone-if-no-acl-found``), its ``superUsers`` add to them."""
    if not isinstance(raw, Mapping):
        raise AclError("an ACL file is a JSON object with 'acls' (and optional 'superUsers')")
    acls = raw.get("acls", [])
    if not isinstance(acls, list):
        raise AclError("'acls' must be a list")
    return Authorizer.of(
        (AclBinding.from_mapping(a) for a in acls),
        [*raw.get("superUsers", []), *super_users],
        bool(raw.get("allowEveryoneIfNoAclFound", allow_everyone_if_no_acl_found)),
    )


def _load(text: str) -> Any:
    """An ACL document: JSON, or YAML (a superset, for hand-written files) when not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_error:
        import yaml  # noqa: PLC0415

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            raise json_error from None


class AclFile:
    """The policy in ``path`` (call it for the current :class:`Authorizer`)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.path = Path(path)
        self.super_users = tuple(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._mtime = self.path.stat().st_mtime_ns
        self._policy = self._read()  # at startup a bad file raises
        self._checked = time.monotonic()

    def _read(self) -> Authorizer:
        try:
            return parse_policy(
                _load(self.path.read_text()), self.super_users, self.allow_everyone_if_no_acl_found
            )
        except (OSError, ValueError) as exc:
            raise AclError(f"ACL file {self.path}: {exc}") from exc

    def __call__(self) -> Authorizer:
        now = time.monotonic()
        if now - self._checked >= CHECK_INTERVAL_S:
            self._checked = now
            try:
                mtime = self.path.stat().st_mtime_ns
                if mtime != self._mtime:
                    self._policy, self._mtime = self._read(), mtime
                    log.info(
                        "ACL policy reloaded from %s (%d bindings)", self.path, len(self._policy.bindings)
                    )
            except (OSError, AclError) as exc:
                log.error("keeping the previous ACL policy: %s", exc)
        return self._policy


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("authorization", "Kafka ACLs on every group API")
    group.add_argument(
        "--acl-source",
        choices=("file", "upstream"),
        default=None,
        help=f"where ACLs come from: --acl-file, or the upstream cluster's DescribeAcls (env {ENV_SOURCE})",
    )
    group.add_argument(
        "--acl-file", default=None, help=f"JSON ACL bindings (env {ENV_FILE}); none: no authorizer"
    )
    group.add_argument(
        "--super-users",
        default=None,
        help=f"semicolon-separated principals, as Kafka's super.users (env {ENV_SUPER_USERS})",
    )
    group.add_argument(
        "--allow-everyone-if-no-acl-found",
        action="store_true",
        default=None,
        help="allow requests on resources no ACL names, as Kafka's allow.everyone.if.no.acl.found "
        f"(default false; env {ENV_ALLOW_EVERYONE}; an ACL file's allowEveryoneIfNoAclFound overrides it)",
    )


def from_arguments(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Any:
    """The ACL policy the flags/environment name (an :class:`AclFile`, or an
    :class:`~.upstream_acls.UpstreamAclSource` the caller connects to its upstream and starts),
    or None (no authorization)."""
    environ = os.environ if environ is None else environ
    users = getattr(args, "super_users", None) or environ.get(ENV_SUPER_USERS) or ""
    everyone = getattr(args, "allow_everyone_if_no_acl_found", None)
    if everyone is None:
        everyone = environ.get(ENV_ALLOW_EVERYONE, "").strip().lower() in ("1", "true", "yes", "on")
    source = getattr(args, "acl_source", None) or environ.get(ENV_SOURCE) or "file"
    if source == "upstream":
        from groupcoord.authorization.upstream_acls import UpstreamAclSource  # noqa: PLC0415

        return UpstreamAclSource(
            super_users=tuple(u.strip() for u in users.split(";") if u.strip()), allow_everyone_if_no_acl_found=everyone
        )
    path = getattr(args, "acl_file", None) or environ.get(ENV_FILE)
    if not path:
        return None
    try:
        return AclFile(path, [u.strip() for u in users.split(";") if u.strip()], everyone)
    except (OSError, AclError) as exc:
        raise SystemExit(f"authorization: {exc}") from None
