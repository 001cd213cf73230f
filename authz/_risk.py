"""The risk class of an element an action touches: destructive or not, read from its name
and its context.

Pure: :func:`classify` is a function of the element's role, accessible name and context
(the title of the dialog it is in, the name of its form, the nearest heading, its
description) to a :class:`RiskClass`. The sidecar puts the answer in Cedar's context
(``context.destructive``, ``context.risk``) so that standing policies apply to it: the
shipped ``destructive-needs-delete-grant`` forbids a destructive action unless the grant
carries the verb ``delete``.

An element is destructive when

1. its own name says it destroys or ends something: a destructive verb ("delete",
   "remove", "erase", "wipe", "terminate", "deactivate", "unsubscribe", "close account",
   "cancel membership" ...) in English, German, French, Spanish or Chinese; or a phrase that
   only destructive controls use ("permanently", "forever", "cannot be undone");
2. or it is a generic confirmation ("Confirm", "Yes", "OK", "Continue", "I understand",
   "Ja", "Oui", "Sí", "确定" ...) or a bare verb that takes its object from the context
   ("Cancel" in "Cancel your membership?") inside a dialog, form or section whose title,
   name, heading or description is destructive.

Not destructive, although the words are near: dismissing ("Cancel", "Close", "Not now",
"Keep my account", "No, go back"), negations ("Don't delete"), undoing ("Undo delete",
"Restore"), removing a view rather than data ("Remove filter", "Clear search", "Close
dialog"), and logging out ("Sign out", "Abmelden" alone).

Measured on a labelled corpus of real controls in five languages: ``bench/destructive.py``
(precision and recall), ``tests/authz/destructive_corpus.yaml`` (the data).
"""

from __future__ import annotations

import enum
import functools
import re
import unicodedata
from dataclasses import dataclass

from handrail.authz._text import fold_words

__all__ = ["RiskClass", "RiskInput", "classify", "is_destructive_text"]


class RiskClass(enum.StrEnum):
    """What an element does, as far as the sidecar can tell from what the page shows."""

    DESTRUCTIVE = "destructive"
    NONE = ""


@dataclass(frozen=True)
class RiskInput:
    """The element and its context, as the executor read them from the page."""

    name: str
    role: str = ""
    dialog_title: str = ""
    form_name: str = ""
    heading: str = ""
    description: str = ""
    visible_text: str = ""  # what it shows, when its name is author-given and says otherwise


def _norm(text: str) -> str:
    """The text as a reader sees it (:func:`._text.fold_words`: no invisible characters,
    look-alike letters read as Latin, letters spaced apart joined), case-folded,
    whitespace collapsed, accents kept apart."""
    return fold_words(text).replace("\u2019", "'").replace("`", "'")


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


# Verbs (and nouns) that destroy or end something, matched as words (prefixes allowed for
# inflections: "deleting", "gelöscht"). Latin-script words are matched without accents.
_DESTRUCTIVE_WORDS = (
    # English
    r"delet\w*",
    r"remov\w*",
    r"eras\w*",
    r"wip(?:e|es|ing|ed)",
    r"destroy\w*",
    r"terminat\w*",
    r"deactivat\w*",
    r"unsubscrib\w*",
    r"purg\w*",
    r"revok\w*",
    r"obliterat\w*",
    r"trash\w*",
    r"discard\w*",
    r"uninstall\w*",
    r"unregister\w*",
    r"unpublish\w*",
    r"disband\w*",
    r"shred\w*",
    r"nuk(?:e|es|ing)",
    r"factory reset",
    r"permanently",
    r"forever",
    r"irreversibl\w*",
    r"cannot be undone",
    r"can't be undone",
    r"can not be undone",
    # German
    r"losch\w*",
    r"geloscht",
    r"entfern\w*",
    r"kundig\w*",
    r"gekundigt",
    r"deaktivier\w*",
    r"vernicht\w*",
    r"widerruf\w*",
    r"endgultig\w*",
    r"unwiderruflich\w*",
    r"austret\w*",
    r"zurucksetzen",
    r"abbestell\w*",
    # French
    r"supprim\w*",
    r"effac\w*",
    r"resili\w*",
    r"desactiv\w*",
    r"desabonn\w*",
    r"desinscri\w*",
    r"detrui\w*",
    r"definitivement",
    r"irreversible",
    r"revoqu\w*",
    r"reinitialis\w*",
    # Spanish
    r"elimin\w*",
    r"borr\w*",
    r"suprim\w*",
    r"desactiv\w*",
    r"destrui\w*",
    r"permanentemente",
    r"definitivamente",
    r"revoc\w*",
    r"dar(?:se)? de baja",
    r"darme de baja",
    r"desuscrib\w*",
    r"desinstal\w*",
    r"restablec\w*",
)

# Phrases of ending something that are destructive only with their object.
_ENDING_PHRASES = (
    # "close account", "cancel my subscription", "end membership", "leave the organization"
    r"(?:close|cancel|end|terminate|stop|delete|leave|quit|exit|abandon)\s+(?:(?:my|your|the|this|our|all)\s+)?"
    r"(?:\w+\s+)?(?:account|subscription|membership|plan|contract|organi[sz]ation|workspace|team|repository|"
    r"project|profile|group|channel|server|store|shop|business|page|order|booking|reservation|trial)s?",
    r"(?:konto|abo|abonnement|vertrag|mitgliedschaft|profil|account)\s+(?:\w+\s+)?"
    r"(?:schlie(?:ss|ß)en|beenden|kundigen|aufl(?:o|ö)sen|loschen)",
    r"mitgliedschaft beenden",
    r"(?:fermer|cloturer|clore|annuler|resilier)\s+(?:mon |votre |le |l'|mon |ma |la )?"
    r"(?:compte|abonnement|adhesion|contrat|profil)",
    r"(?:cerrar|cancelar|anular)\s+(?:mi |tu |su |la |el )?(?:cuenta|suscripcion|membresia|contrato|perfil|plan)",
    r"quitter (?:le |l'|cette )?(?:organisation|groupe|equipe)",
    r"salir (?:del|de la) (?:grupo|organizacion|equipo)",
    r"leave (?:group|team|organization|organisation|workspace|channel|server)",
)

# Chinese (no word boundaries): substrings.
_CHINESE = (
    "删除",
    "移除",
    "注销",
    "清空",
    "清除",
    "退订",
    "取消订阅",
    "关闭账户",
    "关闭帐户",
    "关闭账号",
    "停用",
    "解散",
    "销毁",
    "永久",
    "无法恢复",
    "不可恢复",
    "无法撤销",
    "彻底",
    "抹掉",
    "卸载",
    "退出群",
    "退出团队",
    "退出组织",
    "取消会员",
    "取消订单",
    "解除绑定",
    "撤销授权",
    "格式化",
    "恢复出厂",
)

# Objects whose removal changes a view, not data: "Remove filter", "Clear search".
_HARMLESS_OBJECTS = re.compile(
    r"\b(?:filters?|search|selection|sort(?:ing)?|formatting|highlights?|query|zoom|tag filter|"
    r"from (?:cart|basket|bag|wishlist|comparison|favorites|favourites|view)|"
    r"filtre|filtres|recherche|sélection|selection|filtro|filtros|busqueda|búsqueda|seleccion|selección|"
    r"filter entfernen|auswahl|suche|formatierung)\b"
)
_HARMLESS_CHINESE = ("筛选", "搜索记录", "选择", "格式")

# Dismissals and safe ways out: never destructive, whatever the context says.
_SAFE = re.compile(
    r"^(?:cancel|close|dismiss|back|go back|no|nope|not now|maybe later|later|keep\b.*|stay\b.*|"
    r"no,? .*|don'?t\b.*|do not\b.*|never ?mind|undo\b.*|restore\b.*|recover\b.*|"
    r"abbrechen|schlie(?:ss|ß)en|zuruck|zurück|nein\b.*|behalten\b.*|nicht\b.*|"
    r"annuler|fermer|retour|non\b.*|conserver\b.*|garder\b.*|ne pas\b.*|"
    r"cancelar|cerrar|volver|no\b.*|mantener\b.*|conservar\b.*|"
    r"取消|关闭|返回|否|不\S*|保留\S*|暂不\S*|撤销删除|恢复)$"
)

# Generic confirmations: they take their meaning from the dialog or form they are in.
_CONFIRM = re.compile(
    r"^(?:ok|okay|yes|yes,? .*|confirm|confirm\b.*|continue|proceed|i understand|i'm sure|i am sure|"
    r"do it|submit|apply|accept|agree|done|go|sure|"
    r"ja|ja,? .*|bestatigen|bestätigen|fortfahren|weiter|verstanden|einverstanden|"
    r"oui|oui,? .*|confirmer|continuer|valider|d'accord|je comprends|"
    r"si|sí|sí,? .*|si,? .*|confirmar|continuar|aceptar|entendido|de acuerdo|"
    r"确定|确认|是|是的|好|好的|继续|我已了解|我知道了|同意)$"
)
# Bare verbs of ending: "Cancel" confirms in "Cancel your membership?" when a dialog asks.
_BARE_ENDING = re.compile(r"^(?:end|leave|terminate|kundigen|kündigen|beenden|resilier|résilier|退出|注销)$")
# What keeps rather than ends: "Yes, keep my plan" in a dialog about cancelling.
_KEEP = re.compile(
    r"(?<!\w)(?:keep|stay|retain|resume|behalten|bleiben|conserver|garder|rester|mantener|conservar|quedarme)"
    r"(?!\w)|保留|继续使用|不删除"
)

# Verbs that end or empty something only when the context says what: "Drop table" in a
# dialog about deleting it, "Papierkorb leeren" described as deleting for good.
_WEAK = re.compile(
    r"(?<!\w)(?:finish\w*|drop\w*|reset\w*|empty\w*|clear\w*|cancel\w*|end|quit\w*|leer\w*|vid\w*|vaci\w*|"
    r"retir\w*|quita\w*|quitar|beend\w*)(?!\w)|退出|清"
)

_WORDS = re.compile(r"(?<!\w)(?:" + "|".join(_DESTRUCTIVE_WORDS) + r")(?!\w)")
_PHRASES = re.compile(r"(?<!\w)(?:" + "|".join(_ENDING_PHRASES) + r")(?!\w)")


def is_destructive_text(text: str) -> bool:
    """Whether ``text`` (a name, a title, a description) speaks of destroying or ending."""
    folded = _norm(text)
    if not folded:
        return False
    if any(word in folded for word in _CHINESE) and not any(h in folded for h in _HARMLESS_CHINESE):
        return True
    plain = _strip_accents(folded)
    if _HARMLESS_OBJECTS.search(folded) or _HARMLESS_OBJECTS.search(plain):
        return False
    return bool(_WORDS.search(plain) or _PHRASES.search(plain))


def _is_safe(name: str) -> bool:
    folded = _norm(name).rstrip(".!")
    return bool(_SAFE.match(folded) or _SAFE.match(_strip_accents(folded)))


@functools.lru_cache(maxsize=4096)  # a pure function of the element's texts (RiskInput is frozen)
def classify(element: RiskInput) -> RiskClass:
    """The risk class of an element: DESTRUCTIVE or NONE (see the module docstring). An
    element whose name and shown text differ is destructive if either one reads so."""
    risk = _classify(element.name, element)
    if risk is RiskClass.NONE and element.visible_text:
        risk = _classify(element.visible_text, element)
    return risk


def _classify(label: str, element: RiskInput) -> RiskClass:
    name = _norm(label).rstrip(".!?…")
    if not name:
        return RiskClass.NONE
    context = (element.dialog_title, element.form_name, element.heading, element.description)
    if _is_safe(name) and not _BARE_ENDING.match(name):
        return RiskClass.NONE
    if is_destructive_text(name):
        # "Don't delete", "Keep, don't remove" were caught as safe above.
        return RiskClass.DESTRUCTIVE
    if _KEEP.search(name) or _KEEP.search(_strip_accents(name)):
        return RiskClass.NONE
    plain = _strip_accents(name)
    generic = _CONFIRM.match(name) or _CONFIRM.match(plain) or _BARE_ENDING.match(name) or _WEAK.search(plain)
    if generic and any(is_destructive_text(c) for c in context if c):
        return RiskClass.DESTRUCTIVE
    return RiskClass.NONE
