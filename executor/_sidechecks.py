"""The sidecar's checks of an action beyond its own: its effects, a drag's drop target.

The act path (``_act``) asks the sidecar about the action on its element first; an allow
covers only that. What else the action reaches is asked about too, and the first refusal
is the action's:

- each **effect** (a link's URL, a form's target) that leaves the action's verb or the
  page's origin;
- a **drag by ref**'s drop target: the element it is dropped on is judged by its role, name
  and context as the start element is, so a grant or policy that names elements applies
  to both ends.

:class:`LostChecks` remembers the checks whose answer may have been lost, so that the
agent's retry of that action sends the very same check (see the class).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import replace
from urllib.parse import urlsplit

from handrail._vocabulary import Reason
from handrail.authz import AsyncAuthzClient, Decision, ElementContext, parse_url
from handrail.authz import InvalidArgumentError as AuthzInvalidArgumentError
from handrail.executor._backend import AuthzResource
from handrail.executor._models import ActionSpec
from handrail.executor._session import Session
from handrail.executor._snapshot import RefInfo

__all__ = ["LostChecks", "check_effects", "check_end", "element_context"]


def _origin(url: str) -> str:
    try:
        return parse_url("url", url).origin if url else ""
    except AuthzInvalidArgumentError:
        return ""


def _path(url: str) -> str:
    return urlsplit(url).path or "/"


def element_context(resource: AuthzResource) -> ElementContext:
    """Where the action's element sits, as the sidecar is told it."""
    return ElementContext(
        resource.dialog_title, resource.form_name, resource.heading, resource.description, resource.visible_text
    )


async def check_effects(
    authz: AsyncAuthzClient,
    session: Session,
    spec: ActionSpec,
    action_id: str,
    resource: AuthzResource,
    allowed: Decision,
) -> Decision:
    """Each effect of the action (a link's URL, a form's target) is a check of its own.

    An effect with the action's verb on the page's own URL (its query and fragment aside)
    is covered by the action's allow; any other (another verb, another origin, another
    path: a grant may name paths) must be allowed as well: the first refusal is the
    action's. Effects carry no approval fingerprint: one that needs an approval refuses the
    action, unless an operator approved this very action under the grant the effect needs.
    A single-use grant the action spent is spent for its effects too: the sidecar then
    refuses one within that grant's scope as ``GRANT_EXHAUSTED`` under that grant's id,
    which covers it (its path is the grant's) unless a policy asked for an approval the
    action did not have; one outside it is ``OUT_OF_SCOPE``, and a forbidden one
    ``POLICY_FORBID`` (the sidecar asks Cedar under a spent grant first).
    """
    obs = session.latest
    assert obs is not None
    verb = resource.verb or spec.kind.verb
    here = _origin(resource.url)
    for effect in resource.effects:
        same_origin = effect.verb is verb and here and _origin(effect.url) == here
        if same_origin and _path(effect.url) == _path(resource.url):
            continue
        decision = await authz.check(
            session.agent,
            session.target,
            obs.lease_epoch,
            effect.verb,
            url=effect.url,
            element_role=resource.element_role,
            element_name=resource.element_name,
            action_id=action_id,
            observation_id=obs.observation_id,
            context=element_context(resource),
            document_load=True,
        )
        if same_origin and _given(decision, allowed):
            continue  # within the grant given to this very action (spent by it, or approved for it)
        if not decision.allow:
            why = f"its effect ({effect.why}: {effect.verb.value} {effect.method} {effect.url}) is refused"
            return replace(decision, message=f"{why}: {decision.message}")
    return allowed


def _given(effect: Decision, allowed: Decision) -> bool:
    """Whether the sidecar's refusal of an effect only says that the grant this very action
    was given is spent (by the action) or needs the approval the action had."""
    if effect.allow or effect.grant_id != allowed.grant_id:
        return False
    if effect.reason == Reason.GRANT_EXHAUSTED.value and allowed.grant_consumed:
        return allowed.approval_id != "" or not effect.policies  # a policy asked for an approval
    return effect.reason == Reason.APPROVAL_REQUIRED.value and allowed.approval_id != ""


async def check_end(
    authz: AsyncAuthzClient,
    session: Session,
    spec: ActionSpec,
    action_id: str,
    resource: AuthzResource,
    end: RefInfo,
    allowed: Decision,
) -> Decision:
    """A drag's drop target, judged as its start element was (same verb, page and epoch).

    Its context is the one the cited observation placed it in (its dialog, form and
    heading). No approval fingerprint: a drop target that needs an approval refuses the drag.
    """
    obs = session.latest
    assert obs is not None
    element = end.element
    around = dict(element.contexts()) if element is not None else {}
    context = ElementContext(
        around["dialog"].name if "dialog" in around else "",
        around["form"].name if "form" in around else "",
        around["heading"].name if "heading" in around else "",
        "",
    )
    decision = await authz.check(
        session.agent,
        session.target,
        obs.lease_epoch,
        resource.verb or spec.kind.verb,
        url=resource.url,
        element_role=end.role,
        element_name=end.name,
        action_id=action_id,
        observation_id=obs.observation_id,
        context=context,
    )
    if not decision.allow:
        why = f"its drop target ({end.role} {end.name!r}, {end.ref}) is refused"
        return replace(decision, message=f"{why}: {decision.message}")
    return allowed


class LostChecks:
    """The checks of actions refused ``AUTHZ_UNAVAILABLE``, whose answer may have been lost.

    The sidecar may have committed an allow (consumed a single-use grant, used an approval)
    whose answer never came back: the replica died right after its commit, the connection
    dropped, the deadline passed. It answers the very same check sent again with that
    allow (``replayed``) instead of ``GRANT_EXHAUSTED``; the same check is the same
    ``action_id`` with every other field equal. A refusal does not use up the idempotency
    key, so the agent may send the action again with the same key: when it does with the
    same parameters (and so, unless it observed again, the same observation and epoch),
    its checks carry the lost one's ``action_id``. Nothing was dispatched under the lost
    allow (no intent was written without an allow), so the action still runs at most once.
    Kept per session, key and parameters; the oldest go first past :attr:`MAX`.
    """

    MAX = 1024

    def __init__(self) -> None:
        self._lost: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    def take(self, session_id: str, key: str, fingerprint: str, action_id: str) -> str:
        """The ``action_id`` to check this action under: that of its lost check, if any
        (forgotten here: a new loss remembers it again), else ``action_id``."""
        return self._lost.pop((session_id, key, fingerprint), action_id)

    def lost(self, session_id: str, key: str, fingerprint: str, action_id: str) -> None:
        """The checks of this action under ``action_id`` went unanswered."""
        if key:
            self._lost[(session_id, key, fingerprint)] = action_id
            while len(self._lost) > self.MAX:
                self._lost.popitem(last=False)
