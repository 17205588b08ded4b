"""StreamsGroupHeartbeat (KIP-1071): join, stay, leave, and the session timeout.

Kafka's ``GroupMetadataManager.streamsGroupHeartbeat`` in our habits: one function that reads
the group and returns records, a response and timer intents, never changing anything itself.
Per heartbeat, in Kafka's five steps:

1. the member is created (epoch 0) or checked (its epoch, or the one before it when the
   response that moved it on was lost and it owns nothing it should not), then updated from the
   request; a change the assignor would see bumps the group epoch;
2. the first member's topology becomes the group's (a later member with the same epoch must
   send the same one; an older epoch is told STALE_TOPOLOGY);
3. the topology is configured against the cluster's topics (:mod:`.topology`): while a source
   topic is missing, or an internal topic is missing or mis-sized, the group is NOT_READY,
   every member hears the status, and the internal topics to create go back to the gateway,
   which creates them with the member's rights (``topics_to_create``, ours, not Kafka's wire);
4. a group epoch past the target's recomputes the target (:mod:`.task_assignor`);
5. the member reconciles towards its target (:mod:`.reconciliation`), and hears its tasks when
   they changed or when it joined.

Static membership is not in Kafka 4.4 either ("Static members are not supported yet."); a leave
at epoch -2 is a leave. A group id held by a group of another type is refused, except an empty
classic group, which the first streams member replaces (Kafka's offline migration; its
committed offsets stay). A member asked to revoke tasks must do so within its rebalance timeout or
be fenced, as in Kafka. Left out for now: Interactive Queries' endpoint-to-partition maps, and
warm-up tasks (Kafka's sticky task assignor assigns none either).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from groupcoord.common.errors import CoordinatorError
from groupcoord.coordinator.core.contract import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    TimerIntent,
    deadline_timer,
)
from groupcoord.coordinator.core.streams import streams_group as sg
from groupcoord.coordinator.core.streams.reconciliation import (
    MemberState,
    MemberTasksState,
    TasksTuple,
    owners_of,
    reconcile,
)
from groupcoord.coordinator.core.streams.task_assignor import (
    StreamsMemberSpec,
    Subtopology,
    TaskGroupSpec,
    assign_tasks,
)
from groupcoord.coordinator.core.streams.topology import (
    ConfiguredTopology,
    CopartitionGroup,
    InternalTopic,
    InvalidTopology,
    SubtopologySpec,
    Topology,
    TopologyStatus,
    configure_topology,
)
from groupcoord.coordinator.core.topics_image import TopicsImage
from groupcoord.rpc.v1 import streams_group_pb2 as rpc

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
NUM_STANDBY_REPLICAS = "num.standby.replicas"  # the assignment config Kafka records


@dataclass(frozen=True, slots=True)
class StreamsGroupConfig:
    """The streams group configs, with Kafka's defaults."""

    session_timeout_ms: int = 45_000  # streams.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # streams.heartbeat.interval.ms
    num_standby_replicas: int = 0  # streams.num.standby.replicas
    initial_rebalance_delay_ms: int = 3_000  # streams.initial.rebalance.delay.ms

    def assignment_configs(self) -> dict[str, str]:
        return {NUM_STANDBY_REPLICAS: str(self.num_standby_replicas)}


def session_timer_key(group_id: str, member_id: str) -> str:
    return f"streams-session:{group_id}:{member_id}"


def rebalance_timer_key(group_id: str, member_id: str) -> str:
    return f"streams-rebalance:{group_id}:{member_id}"


def initial_rebalance_key(group_id: str) -> str:
    return f"streams-initial-rebalance:{group_id}"


ASSIGNMENT_DELAYED = 5  # StreamsGroupHeartbeatResponse.Status
INITIAL_DELAY_DETAIL = "Assignment delayed due to the configured initial rebalance delay."


@dataclass(frozen=True, slots=True)
class Expiries:
    """What the heartbeat's timers run, on the shard's state as it is when they fire:
    ``session(group_id, member_id, deadline_ms)``, ``rebalance(group_id, member_id,
    member_epoch, deadline_ms)`` and ``initial_rebalance(group_id, deadline_ms)``; and whether
    a group's initial rebalance delay still runs (``delaying(group_id)``)."""

    session: Callable[[str, str, int], CoordinatorResult]
    rebalance: Callable[[str, str, int, int], CoordinatorResult]
    initial_rebalance: Callable[[str, int], CoordinatorResult]
    delaying: Callable[[str], bool]


def error_result(code: ErrorCode, message: str | None = None) -> CoordinatorResult[rpc.StreamsGroupHeartbeatResponse]:
    """Kafka's ``StreamsGroupHeartbeatResult.forError``: the code and message, nothing else."""
    out = rpc.StreamsGroupHeartbeatResponse(error_code=code.value)
    if message is not None:
        out.error_message = message
    return CoordinatorResult(response=out)


def validate(request: rpc.StreamsGroupHeartbeatRequest) -> tuple[ErrorCode, str] | None:
    """Kafka's ``throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures``, then
    ``throwIfStreamsGroupHeartbeatRequestIsInvalid``, in Kafka's order: the first failure."""
    invalid = ErrorCode.invalid_request
    if request.HasField("topology"):
        for sub in request.topology.subtopologies:
            if sub.source_topic_regex:
                return invalid, "Regular expressions for source topics are not supported yet."
    if not request.member_id.strip():
        return invalid, "MemberId can't be empty."
    if not request.group_id.strip():
        return invalid, "GroupId can't be empty."
    if request.HasField("instance_id") and not request.instance_id.strip():
        return invalid, "InstanceId can't be empty."
    if request.HasField("rack_id") and not request.rack_id.strip():
        return invalid, "RackId can't be empty."
    epoch = request.member_epoch
    owned = [request.HasField(k) for k in ("active_tasks", "standby_tasks", "warmup_tasks")]
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return invalid, "RebalanceTimeoutMs must be provided in first request."
        for kind, name in (("active_tasks", "ActiveTasks"), ("standby_tasks", "StandbyTasks"), ("warmup_tasks", "WarmupTasks")):
            if request.HasField(kind) and getattr(request, kind).tasks:
                return invalid, f"{name} must be empty when (re-)joining."
        if not request.HasField("topology"):
            return invalid, "Topology must be non-null when (re-)joining."
        for sub in request.topology.subtopologies:
            for topic in sub.state_changelog_topics:
                if topic.partitions != 0:
                    return (
                        ErrorCode.streams_invalid_topology,
                        f"Changelog topic {topic.name} must have an undefined partition count, "
                        f"but it is set to {topic.partitions}.",
                    )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not request.HasField("instance_id"):
            return invalid, "InstanceId can't be null."
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return invalid, f"MemberEpoch is {epoch}, but must be greater than or equal to -2."
    if any(owned) and not all(owned):
        return invalid, "If one task-type is non-null, all must be non-null."
    if epoch != JOIN_GROUP_MEMBER_EPOCH and request.HasField("topology"):
        return invalid, "Topology can only be provided when (re-)joining."
    return None


# --- the request's values --------------------------------------------------------------------


def topology_of(message: rpc.StreamsTopology) -> Topology:
    def topic(t: rpc.StreamsTopicInfo) -> InternalTopic:
        return InternalTopic(t.name, t.partitions, t.replication_factor, {c.key: c.value for c in t.topic_configs})

    return Topology(
        message.epoch,
        tuple(
            SubtopologySpec(
                s.subtopology_id,
                tuple(s.source_topics),
                tuple(s.repartition_sink_topics),
                tuple(topic(t) for t in s.repartition_source_topics),
                tuple(topic(t) for t in s.state_changelog_topics),
                tuple(
                    CopartitionGroup(tuple(g.source_topics), tuple(g.repartition_source_topics))
                    for g in s.copartition_groups
                ),
                tuple(s.source_topic_regex),
            )
            for s in message.subtopologies
        ),
    )


def _tasks_in(message: rpc.StreamsTaskIdsList) -> dict[str, frozenset[int]]:
    return {t.subtopology_id: frozenset(t.partitions) for t in message.tasks if t.partitions}


def owned_tasks(request: rpc.StreamsGroupHeartbeatRequest) -> TasksTuple | None:
    """The tasks the heartbeat says the member owns (None: it did not say)."""
    if not request.HasField("active_tasks"):
        return None
    return TasksTuple(
        _tasks_in(request.active_tasks), _tasks_in(request.standby_tasks), _tasks_in(request.warmup_tasks)
    )


def _set_tasks(into: rpc.StreamsTaskIdsList, tasks: Iterable[tuple[str, frozenset[int]]]) -> None:
    into.SetInParent()  # present even when empty: "no tasks" is news too
    for subtopology, partitions in sorted(tasks):
        if partitions:
            into.tasks.add(subtopology_id=subtopology, partitions=sorted(partitions))


# --- steps -----------------------------------------------------------------------------------


def _fence(group: sg.StreamsGroup, member_id: str) -> list[CoordinatorRecord]:
    """A member gone (left or expired): its records out, the group epoch up (Kafka's
    ``streamsGroupFenceMember``)."""
    return [
        *sg.member_tombstones(group.group_id, member_id),
        sg.metadata_record(replace(group, group_epoch=group.group_epoch + 1)),
    ]


def _member_for(
    group: sg.StreamsGroup, request: rpc.StreamsGroupHeartbeatRequest, owned: TasksTuple | None
) -> sg.StreamsGroupMember:
    """Kafka's ``getOrMaybeCreateDynamicStreamsGroupMember`` with its epoch checks."""
    member_id, epoch = request.member_id, request.member_epoch
    member = group.members.get(member_id)
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if member is not None:
            return member
        return sg.StreamsGroupMember(MemberTasksState(member_id, request.process_id, 0))
    if member is None:
        raise CoordinatorError(
            ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
        )
    current = member.tasks.member_epoch
    if epoch > current:
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            f"The streams group member has a greater member epoch ({epoch}) than the one known by the "
            f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
        )
    if epoch < current:
        previous = group.previous_member_epochs.get(member_id)
        if epoch != previous or (owned is not None and not _subset(owned, member.tasks.assigned)):
            raise CoordinatorError(
                ErrorCode.fenced_member_epoch,
                f"The streams group member has a smaller member epoch ({epoch}) than the one known by the "
                f"group coordinator ({current}). The member must abandon all its partitions and rejoin.",
            )
    return member


def _check_owned_tasks(subtopologies: Mapping[str, Subtopology], owned: TasksTuple | None) -> None:
    """Kafka's ``throwIfRequestContainsInvalidTasks``: owned tasks must exist in the topology."""
    if owned is None:
        return
    for kind in ("active", "standby", "warmup"):
        for subtopology_id, partitions in sorted(getattr(owned, kind).items()):
            sub = subtopologies.get(subtopology_id)
            if sub is None:
                raise CoordinatorError(
                    ErrorCode.invalid_request, f"Subtopology {subtopology_id} does not exist in the topology."
                )
            for partition in sorted(partitions):
                if not 0 <= partition < sub.partitions:
                    raise CoordinatorError(
                        ErrorCode.invalid_request,
                        f"Task {partition} for subtopology {subtopology_id} is invalid. Number of tasks for "
                        f"this subtopology: {sub.partitions}",
                    )


def _subset(owned: TasksTuple, assigned: TasksTuple) -> bool:
    for kind in ("active", "standby", "warmup"):
        mine = getattr(assigned, kind)
        for subtopology, partitions in getattr(owned, kind).items():
            if not partitions <= mine.get(subtopology, frozenset()):
                return False
    return True


def _updated(member: sg.StreamsGroupMember, request: rpc.StreamsGroupHeartbeatRequest) -> sg.StreamsGroupMember:
    """The member as this heartbeat describes it (null fields: unchanged)."""
    tasks = member.tasks
    if request.HasField("process_id") and request.process_id != tasks.process_id:
        tasks = replace(tasks, process_id=request.process_id)
    return replace(
        member,
        tasks=tasks,
        rack_id=request.rack_id if request.HasField("rack_id") else member.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms
        if request.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        topology_epoch=request.topology.epoch if request.HasField("topology") else member.topology_epoch,
        client_id=request.client_id,
        client_host=request.client_host,
        client_tags={t.key: t.value for t in request.client_tags.values}
        if request.HasField("client_tags")
        else member.client_tags,
        user_endpoint=(request.user_endpoint.host, request.user_endpoint.port)
        if request.HasField("user_endpoint")
        else member.user_endpoint,
    )


def _topology(group: sg.StreamsGroup, request: rpc.StreamsGroupHeartbeatRequest) -> tuple[Topology, bool]:
    """Kafka's ``maybeUpdateTopology``: the group's topology after this heartbeat, and whether
    it is new (to be written)."""
    if not request.HasField("topology"):
        if group.topology is None:
            raise CoordinatorError(ErrorCode.unknown_server_error, "The topology is null and the group topology is also null.")
        return group.topology, False
    asked = topology_of(request.topology)
    if group.topology is None:
        return asked, True
    if group.topology.epoch > asked.epoch:
        return group.topology, False
    if group.topology != asked:
        raise CoordinatorError(ErrorCode.invalid_request, "Topology updates are not supported yet.")
    return group.topology, False


# The last configuration of each topology, by group: (topology, metadata hash, configured).
# A steady member's heartbeat finds its topology and its topics unchanged, so it reuses the
# configuration (Kafka keeps it in the group as ``configuredTopology``). Derived, never state:
# a miss only recomputes. Keyed by the topology object itself (immutable), so a group's new
# topology, or another coordinator's group of the same id in this process, is a miss.
_CONFIGURED: dict[str, tuple[Topology, int, ConfiguredTopology]] = {}
_CONFIGURED_ENTRIES = 10_000


def configured(group_id: str, topology: Topology, image: TopicsImage) -> tuple[ConfiguredTopology, int]:
    """The topology against the image's topics, and the metadata hash of the topics it names
    (the configuration depends on nothing else: it is reused while both stay the same)."""
    names = sg.topology_topic_names(topology)
    metadata_hash = image.metadata_hash(names)
    last = _CONFIGURED.get(group_id)
    if last is not None and last[0] is topology and last[1] == metadata_hash:
        return last[2], metadata_hash
    counts = {}
    for name in names:
        topic_id = image.topic_id(name)
        if topic_id is not None:
            counts[name] = image.num_partitions(topic_id)
    result = configure_topology(topology, counts)
    if len(_CONFIGURED) >= _CONFIGURED_ENTRIES:
        _CONFIGURED.clear()
    _CONFIGURED[group_id] = (topology, metadata_hash, result)
    return result, metadata_hash


def _target(
    group: sg.StreamsGroup,
    members: dict[str, sg.StreamsGroupMember],
    topology: ConfiguredTopology,
    config: StreamsGroupConfig,
) -> dict[str, TasksTuple]:
    """Every member's new target: the sticky task assignor's, or nothing while not ready."""
    if topology.subtopologies is None or not topology.ready:
        return {m: TasksTuple() for m in members}
    previous = group.targets
    spec = TaskGroupSpec(
        {
            m: StreamsMemberSpec(
                member.tasks.process_id,
                previous.get(m, TasksTuple()).active,
                previous.get(m, TasksTuple()).standby,
            )
            for m, member in members.items()
        },
        topology.subtopologies,
        config.num_standby_replicas,
    )
    return {
        m: TasksTuple(
            {s: frozenset(ps) for s, ps in tasks.active.items() if ps},
            {s: frozenset(ps) for s, ps in tasks.standby.items() if ps},
        )
        for m, tasks in assign_tasks(spec).items()
    }


def new_target(
    group: sg.StreamsGroup,
    members: dict[str, sg.StreamsGroupMember],
    topology: ConfiguredTopology,
    config: StreamsGroupConfig,
    group_epoch: int,
) -> tuple[dict[str, TasksTuple], list[CoordinatorRecord]]:
    """The group's target for ``group_epoch`` and the records of what changed in it."""
    targets = _target(group, members, topology, config)
    records = [
        sg.target_assignment_member_record(group.group_id, m, tasks)
        for m, tasks in sorted(targets.items())
        if group.targets.get(m) != tasks
    ]
    return targets, records + [sg.target_assignment_metadata_record(group.group_id, group_epoch)]


def initial_rebalance_expired(
    group: sg.StreamsGroup | None, config: StreamsGroupConfig, image: TopicsImage
) -> CoordinatorResult[None]:
    """A new group's initial rebalance delay ended: its first target, for every member that
    joined meanwhile, at a new group epoch (the members reconciled to epoch 1 while it ran, and
    must see the target as new). Nothing if the group went, or a target is already there."""
    if group is None or group.topology is None or group.group_epoch <= group.assignment_epoch:
        return CoordinatorResult()
    try:
        ready = configured(group.group_id, group.topology, image)[0]
    except InvalidTopology:
        return CoordinatorResult()
    epoch = group.group_epoch + 1
    bumped = sg.metadata_record(replace(group, group_epoch=epoch))
    return CoordinatorResult(records=[bumped, *new_target(group, dict(group.members), ready, config, epoch)[1]])


def heartbeat(
    group: sg.StreamsGroup | None,
    request: rpc.StreamsGroupHeartbeatRequest,
    now_ms: int,
    config: StreamsGroupConfig,
    image: TopicsImage,
    expire: Expiries,
) -> CoordinatorResult[rpc.StreamsGroupHeartbeatResponse]:
    """Answer one StreamsGroupHeartbeat. ``group`` is the streams group of that id (None: none
    yet); ``expire`` says what its timers run."""
    problem = validate(request)
    if problem is not None:
        return error_result(*problem)
    try:
        return _heartbeat(group, request, now_ms, config, image, expire)
    except CoordinatorError as e:
        return error_result(e.code, e.message)
    except InvalidTopology as e:
        return error_result(ErrorCode.streams_invalid_topology, str(e))


def _heartbeat(
    group: sg.StreamsGroup | None,
    request: rpc.StreamsGroupHeartbeatRequest,
    now_ms: int,
    config: StreamsGroupConfig,
    image: TopicsImage,
    expire: Expiries,
) -> CoordinatorResult[rpc.StreamsGroupHeartbeatResponse]:
    epoch, member_id = request.member_epoch, request.member_id
    if group is None:
        if epoch != JOIN_GROUP_MEMBER_EPOCH:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Streams group {request.group_id} not found.")
        group = sg.StreamsGroup(request.group_id)
    if epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
        if member_id not in group.members:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group.group_id}."
            )
        return CoordinatorResult(
            records=_fence(group, member_id),
            response=rpc.StreamsGroupHeartbeatResponse(member_id=member_id, member_epoch=epoch),
            timers=[
                CancelTimer(session_timer_key(group.group_id, member_id)),
                CancelTimer(rebalance_timer_key(group.group_id, member_id)),
            ],
        )
    if request.HasField("instance_id"):
        raise CoordinatorError(ErrorCode.unknown_server_error, "Static members are not supported yet.")
    owned = owned_tasks(request)
    member = _member_for(group, request, owned)
    records: list[CoordinatorRecord] = []
    statuses: list[tuple[int, str]] = []

    # 1. the member
    updated = _updated(member, request)
    bump = member_id not in group.members or updated != member
    if bump:
        records.append(sg.member_metadata_record(group.group_id, updated))
    # 2. the topology
    topology, new_topology = _topology(group, request)
    if new_topology:
        records.append(sg.topology_record(group.group_id, topology))
    if updated.topology_epoch < topology.epoch:
        statuses.append(
            (
                TopologyStatus.STALE_TOPOLOGY,
                f"The member's topology epoch {updated.topology_epoch} is behind the group's topology "
                f"epoch {topology.epoch}.",
            )
        )
    # 3. the topology against the cluster's topics
    ready, metadata_hash = configured(group.group_id, topology, image)
    bump = bump or new_topology or metadata_hash != group.metadata_hash
    validated_epoch = topology.epoch if ready.ready else -1
    if ready.ready and ready.subtopologies is not None:
        _check_owned_tasks(ready.subtopologies, owned)
    bump = bump or validated_epoch != group.validated_topology_epoch
    assignment_configs = config.assignment_configs()
    bump = bump or assignment_configs != group.assignment_configs
    group_epoch = group.group_epoch
    if bump:
        group_epoch += 1
        records.append(
            sg.metadata_record(
                replace(
                    group,
                    group_epoch=group_epoch,
                    metadata_hash=metadata_hash,
                    validated_topology_epoch=validated_epoch,
                    assignment_configs=assignment_configs,
                )
            )
        )
    # 4. the target: held back while a new group's initial rebalance delay runs (the members
    # reconcile towards nothing at epoch 1 meanwhile), as Kafka 4.4 does
    members = {**group.members, member_id: updated}
    timers: list[TimerIntent] = []
    delaying = expire.delaying(group.group_id)
    if group.group_epoch == 0 and config.initial_rebalance_delay_ms > 0:
        delaying = True
        timers.append(
            deadline_timer(
                initial_rebalance_key(group.group_id), config.initial_rebalance_delay_ms, now_ms,
                expire.initial_rebalance, group.group_id,
            )  # fmt: skip
        )
    if group_epoch > group.assignment_epoch and delaying:
        target_epoch, target = max(1, group.assignment_epoch), TasksTuple()
        statuses.append((ASSIGNMENT_DELAYED, INITIAL_DELAY_DETAIL))
    elif group_epoch > group.assignment_epoch:
        targets, written = new_target(group, members, ready, config, group_epoch)
        records += written
        target_epoch, target = group_epoch, targets.get(member_id, TasksTuple())
    else:
        target_epoch, target = group.assignment_epoch, group.targets.get(member_id, TasksTuple())
    # 5. reconciliation
    owners = owners_of({m: x.tasks for m, x in members.items()})
    tasks = reconcile(updated.tasks, target_epoch, target, owners, owned)
    if tasks is not updated.tasks:
        previous = (
            updated.tasks.member_epoch
            if tasks.member_epoch != updated.tasks.member_epoch
            else group.previous_member_epochs.get(member_id, updated.tasks.member_epoch)
        )
        records.append(sg.current_assignment_record(group.group_id, tasks, previous))

    response = rpc.StreamsGroupHeartbeatResponse(
        member_id=member_id, member_epoch=tasks.member_epoch, heartbeat_interval_ms=config.heartbeat_interval_ms
    )
    if epoch == JOIN_GROUP_MEMBER_EPOCH or tasks.assigned != member.tasks.assigned:
        _set_tasks(response.active_tasks, tasks.assigned.active.items())
        _set_tasks(response.standby_tasks, tasks.assigned.standby.items())
        _set_tasks(response.warmup_tasks, tasks.assigned.warmup.items())
    if ready.status is not None:
        statuses.append((ready.status, ready.detail))
        for topic in ready.topics_to_create:
            response.topics_to_create.add(
                name=topic.name,
                partitions=topic.partitions,
                replication_factor=topic.replication_factor,
                configs=[rpc.StreamsKeyValue(key=k, value=v) for k, v in sorted(topic.configs.items())],
            )
    if statuses:
        response.status.SetInParent()
        for code, detail in statuses:
            response.status.statuses.add(status_code=int(code), status_detail=detail)
    timers.append(
        deadline_timer(
            session_timer_key(group.group_id, member_id), config.session_timeout_ms, now_ms, expire.session,
            group.group_id, member_id,
        )  # fmt: skip
    )
    if tasks is not updated.tasks:  # Kafka's rebalance timeout: revoke in time or be fenced
        if tasks.state is MemberState.UNREVOKED_TASKS:
            timers.append(
                deadline_timer(
                    rebalance_timer_key(group.group_id, member_id), updated.rebalance_timeout_ms, now_ms,
                    expire.rebalance, group.group_id, member_id, tasks.member_epoch,
                )  # fmt: skip
            )
        else:
            timers.append(CancelTimer(rebalance_timer_key(group.group_id, member_id)))
    return CoordinatorResult(records=records, response=response, timers=timers)


def session_expired(group: sg.StreamsGroup | None, member_id: str) -> CoordinatorResult[None]:
    """The session timer of ``member_id`` fired: fence it (nothing, if it left or the group
    went in the meantime)."""
    if group is None or member_id not in group.members:
        return CoordinatorResult()
    return CoordinatorResult(
        records=_fence(group, member_id), timers=[CancelTimer(rebalance_timer_key(group.group_id, member_id))]
    )


def rebalance_expired(group: sg.StreamsGroup | None, member_id: str, member_epoch: int) -> CoordinatorResult[None]:
    """The rebalance timer of ``member_id`` fired: fence it if it still has not revoked what it
    was asked to at that epoch (Kafka's ``scheduleStreamsGroupRebalanceTimeout``)."""
    member = group.members.get(member_id) if group is not None else None
    if (
        group is None
        or member is None
        or member.tasks.state is not MemberState.UNREVOKED_TASKS
        or member.tasks.member_epoch != member_epoch
    ):
        return CoordinatorResult()
    return CoordinatorResult(
        records=_fence(group, member_id), timers=[CancelTimer(session_timer_key(group.group_id, member_id))]
    )


def timers_after_load(
    group: sg.StreamsGroup,
    now_ms: int,
    config: StreamsGroupConfig,
    expire: Expiries,
) -> list[TimerIntent]:
    """After a takeover every member gets a fresh session, and a member still revoking a fresh
    rebalance timeout, as in Kafka (a timer is not state)."""
    timers: list[TimerIntent] = []
    for m, member in group.members.items():
        timers.append(
            deadline_timer(
                session_timer_key(group.group_id, m), config.session_timeout_ms, now_ms, expire.session,
                group.group_id, m,
            )  # fmt: skip
        )
        if member.tasks.state is MemberState.UNREVOKED_TASKS:
            timers.append(
                deadline_timer(
                    rebalance_timer_key(group.group_id, m), member.rebalance_timeout_ms, now_ms, expire.rebalance,
                    group.group_id, m, member.tasks.member_epoch,
                )  # fmt: skip
            )
    return timers
