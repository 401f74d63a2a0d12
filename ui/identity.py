"""Who is editing: the policy that turns the settings and one request into an identity.

Pure functions over plain values (the :class:`~ui.settings.AccessPolicy`, ``st.user`` as a
dict, a header's value, the server's listen address), so every case is a row in
``tests/pages/test_identity.py``; ``ui/sidebar.py`` only reads Streamlit and renders the result.

How the console knows who is at the keyboard, strongest first (the first that is
configured wins; a verified identity is never replaced by a weaker one):

=======  ===================================================  ================================
mode     configured by                                        the editor's name
=======  ===================================================  ================================
signin   an ``[auth]`` section in secrets.toml (OpenID         the signed-in user's claim
         Connect, Streamlit's ``st.login``)                    ``identity_claim`` (default
                                                               ``email``), verified by the
                                                               provider
proxy    ``[access] trust_proxy_header = true`` and            the header's value, trusted only
         ``user_header``, with the app listening on            when nothing but the proxy can
         loopback (``server.address`` 127.0.0.1, ::1 or        reach the app
         localhost) behind that proxy
local    ``[access] mode = "local"`` or QUOTA_LOCAL_MODE=1     a typed name: NOT verified, and
                                                               the sidebar says so
none     nothing of the above                                  nobody may edit; the Edit page
                                                               says how to set one up
=======  ===================================================  ================================

The editors list (``[access] editors`` / QUOTA_EDITORS) is matched against that name: exactly,
except an email address (``identity_claim = "email"``), which is compared ignoring case.
The audit log records the same name.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ui.settings import AccessPolicy

__all__ = ["Identity", "SIGNIN", "PROXY", "LOCAL", "NONE", "LOCAL_MODE_NOTICE",
           "LOCAL_MODE_DETAIL", "is_loopback", "nothing_configured", "access_mode", "identify",
           "may_edit", "setup_banner"]

SIGNIN, PROXY, LOCAL, NONE = "signin", "proxy", "local", "none"

#: What the sidebar and the Edit page say in local mode, word for word.
LOCAL_MODE_NOTICE = "Local mode: names are not verified."
LOCAL_MODE_DETAIL = ("Anyone who can open this page can type any name, and the audit log "
                     "records what was typed.")

_SETUP = ("Configure sign-in (an [auth] section in .streamlit/secrets.toml), or a trusted "
          "proxy header ([access] trust_proxy_header = true with user_header), or, on your own "
          "machine only, local mode (QUOTA_LOCAL_MODE=1 or [access] mode = \"local\"; "
          "`make run` sets it for its demo broker).")


@dataclass(frozen=True)
class Identity:
    """Who this request is, as far as the console can tell.

    ``name`` is what the editors list is matched against and what the audit log records;
    None when nobody is identified (not signed in, no header, no name typed). ``problem``
    says why nobody may edit at all in this configuration or request (shown as a banner),
    and is None when the only thing missing is the person signing in or typing a name."""

    mode: str
    name: str | None = None
    #: How the name was obtained, for the sidebar: "verified email", "X-Forwarded-User
    #: header", "typed, not verified".
    via: str = ""
    problem: str | None = None
    #: The problem is the configuration's (a banner for everyone), not this person's.
    setup: bool = False

    @property
    def verified(self) -> bool:
        return self.mode in (SIGNIN, PROXY) and self.name is not None


def is_loopback(address: str | None) -> bool:
    """Whether Streamlit's ``server.address`` accepts connections from this machine only.

    Unset (None or "") means every interface, so it is not loopback."""
    if not address:
        return False
    host = str(address).strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name other than localhost: it may resolve to anything
        return False


def nothing_configured(policy: AccessPolicy) -> bool:
    """No way of identifying editors is configured (and none is refused): what `make run`
    checks before it turns on local mode for its demo backend."""
    return not (policy.signin or policy.trust_proxy_header or policy.local_mode
                or policy.user_header or policy.mode_error or policy.read_only)


def access_mode(policy: AccessPolicy, server_address: str | None) -> tuple[str, str | None]:
    """``(mode, problem)``: how editors are identified, and why nobody may edit (or None)."""
    if policy.mode_error:
        return NONE, policy.mode_error
    if policy.signin:
        if policy.signin_problems:
            return SIGNIN, ("Sign-in is configured but incomplete: "
                            + "; ".join(policy.signin_problems) + ".")
        return SIGNIN, None
    if policy.trust_proxy_header:
        if not policy.user_header:
            return PROXY, ("[access] trust_proxy_header = true needs [access] user_header "
                           "(QUOTA_USER_HEADER): the header the proxy sets.")
        if not is_loopback(server_address):
            where = f"{server_address!r}" if server_address else "unset (every interface)"
            return PROXY, (f"Editing is refused: the {policy.user_header} header is trusted "
                           f"only when the console listens on loopback behind the proxy that "
                           f"sets it, but server.address is {where}, so any client that "
                           f"reaches the port could send the header. Start it with "
                           f"--server.address 127.0.0.1 behind the proxy, or configure "
                           f"sign-in ([auth]).")
        return PROXY, None
    if policy.local_mode:
        return LOCAL, None
    if policy.user_header:
        return NONE, (f"The {policy.user_header} header is not trusted: a client can send any "
                      f"header. Behind an authenticating proxy, set [access] "
                      f"trust_proxy_header = true and listen on 127.0.0.1; or configure "
                      f"sign-in ([auth]).")
    return NONE, "Nobody is identified, so nobody may edit. " + _SETUP


def identify(policy: AccessPolicy, mode: str, problem: str | None = None, *,
             user: Mapping[str, Any] | None = None, header_value: str | None = None,
             typed: str | None = None) -> Identity:
    """The identity for one request in ``mode``: from ``user`` (``st.user`` as a dict) in
    signin mode, from ``header_value`` in proxy mode, from ``typed`` in local mode. The
    other inputs are ignored: a header never overrides sign-in, a typed name never counts
    outside local mode."""
    if problem:
        return Identity(mode, problem=problem, setup=True)
    if mode == SIGNIN:
        user = user or {}
        if not user.get("is_logged_in"):
            return Identity(mode)
        claim = policy.identity_claim
        value = user.get(claim)
        name = str(value).strip() if isinstance(value, (str, int)) else ""
        if not name:
            return Identity(mode, via=f"no {claim} claim", problem=(
                f"You are signed in, but the provider sent no {claim!r} claim, which names "
                f"editors here ([access] identity_claim). Ask an admin to pick a claim the "
                f"provider sends (e.g. email, preferred_username, sub)."))
        if claim == "email" and user.get("email_verified") is False:
            return Identity(mode, via="email not verified", problem=(
                f"The provider says the email address {name} is not verified: verify it "
                f"with the provider, then sign in again."))
        return Identity(mode, name, f"verified {claim}")
    if mode == PROXY:
        name = (header_value or "").strip()
        return Identity(mode, name or None, f"{policy.user_header} header")
    if mode == LOCAL:
        name = (typed or "").strip()
        return Identity(mode, name or None, "typed, not verified")
    return Identity(NONE, problem="Nobody is identified, so nobody may edit. " + _SETUP,
                    setup=True)


def setup_banner(policy: AccessPolicy, identity: Identity) -> str | None:
    """The configuration problem to show above every page, or None. A console where nothing
    about editors is configured gets no banner (its Edit page says how); one whose editors
    setting is refused (an untrusted or unsafe header, incomplete sign-in) does."""
    if policy.read_only or not identity.setup or not identity.problem:
        return None
    if identity.mode == NONE and not (policy.mode_error or policy.user_header):
        return None
    return identity.problem


def _is_editor(policy: AccessPolicy, identity: Identity) -> bool:
    if policy.editors is None:
        return True
    if identity.mode == SIGNIN and policy.identity_claim == "email":
        return identity.name.casefold() in {e.casefold() for e in policy.editors}
    return identity.name in policy.editors


def may_edit(policy: AccessPolicy, identity: Identity) -> tuple[bool, str]:
    """``(allowed, why-not)`` for ``identity`` under ``policy``."""
    if policy.read_only:
        return False, "This console is read-only (QUOTA_READ_ONLY / [access] read_only)."
    if identity.problem:
        return False, identity.problem
    if identity.name is None:
        if identity.mode == SIGNIN:
            return False, "Sign in to edit: every change is recorded with your identity."
        if identity.mode == PROXY:
            return False, (f"No user name arrived in the {policy.user_header} header: open "
                           f"the console through the proxy that sets it.")
        if identity.mode == LOCAL:
            return False, "Type your name in the sidebar: every change is recorded with it."
        return False, "Nobody is identified, so nobody may edit. " + _SETUP
    if not _is_editor(policy, identity):
        what = {SIGNIN: f"Signed in as {identity.name}, which",
                PROXY: f"{identity.name!r} (from the {policy.user_header} header)",
                LOCAL: f"{identity.name!r}"}.get(identity.mode, repr(identity.name))
        return False, (f"{what} is not in the editors list ([access] editors / "
                       f"QUOTA_EDITORS). Ask an admin to add you.")
    return True, ""
