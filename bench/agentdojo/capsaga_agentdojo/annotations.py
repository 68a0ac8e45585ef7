"""What each AgentDojo tool does, read from its code (AgentDojo 0.1.35,
``default_suites/v1/tools/*.py``), as capsaga's information-flow rules will
need it. This is the source of ``bench/agentdojo/catalog.json`` and of the
README's table; ``scripts/agentdojo catalog`` checks the side effects against
the environment (every ground-truth call run on a fresh environment, compared
before and after).

Per tool:
- ``writes``: what the function changes in the environment (``None``: nothing).
  ``effect`` says whom the change reaches: ``outbound`` (a third party sees it
  or gets something: an e-mail, money, a message, a booking, a request, an
  access grant) or ``internal`` (the user's own state only).
- ``key_args``: arguments of a side effect whose whole value decides where the
  effect goes or how large it is (recipient, IBAN, amount, URL, file or event
  id, channel, user ...): they must come from a trusted source, or a human
  approves.
- ``endorsed_args``: the key arguments whose effect cannot be taken back
  (a file deleted, money sent, an e-mail, invitation or message delivered,
  access granted, a member removed, a page published): where it goes or what
  it destroys must be a principal's word (the user's message, the operator's
  policy, an approval), never a tool's output, even a field the operator
  confirmed trusted (capsaga's ``endorsed`` sink): a system id proves a file
  is real, not that the user chose it.
- ``scanned_args``: free text of a side effect (a body, a subject, a file's
  content): its prose may come from data, but identifier-like tokens inside
  it (addresses, IBANs, URLs, ids) are held to the key-argument rule.
- ``output``: each field of the result and who writes it: ``third_party``
  (attacker-controllable: whoever sent the mail, wrote the review, owns the
  channel), ``user`` (the user's own records), ``system`` (assigned or
  computed by the service: ids, sizes, balances, the current day), ``echo``
  (repeats the call's arguments: labelled as those arguments were, never a
  source of trust by itself, or an echo would launder an untrusted
  argument). Paths: ``$`` the whole result, ``[]`` each list item, ``{}`` each
  mapping key, ``{}.value`` each mapping value, ``a.b`` a field.
- ``why``: the reasoning, shown in the README.
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Tool:
    """One tool's annotation (see the module docs)."""

    writes: str | None
    effect: str | None
    output: dict[str, str]
    why: str
    key_args: tuple[str, ...] = ()
    endorsed_args: tuple[str, ...] = ()
    scanned_args: tuple[str, ...] = ()
    risk: str = "low"

    def check(self, name: str) -> None:
        """Raise ValueError on an inconsistent annotation."""
        if (self.writes is None) != (self.effect is None):
            raise ValueError(f"{name}: writes and effect go together")
        if self.effect not in (None, "outbound", "internal"):
            raise ValueError(f"{name}: effect {self.effect!r}")
        if self.writes is None and (self.key_args or self.scanned_args):
            raise ValueError(f"{name}: key or scanned arguments without a side effect")
        if not set(self.endorsed_args) <= set(self.key_args):
            raise ValueError(f"{name}: endorsed arguments must be key arguments")
        for v in self.output.values():
            if v not in ("third_party", "user", "system", "echo"):
                raise ValueError(f"{name}: output label {v!r}")
        if self.risk not in ("low", "medium", "high"):
            raise ValueError(f"{name}: risk {self.risk!r}")

    @property
    def has_side_effects(self) -> bool:
        """Whether the function writes the environment."""
        return self.writes is not None

    @property
    def returns_untrusted(self) -> bool:
        """Whether any output field is third-party or an echo."""
        return any(v in ("third_party", "echo") for v in self.output.values())

    def to_json(self) -> dict[str, Any]:
        """The annotation as catalog fields."""
        return {
            "has_side_effects": self.has_side_effects,
            "effect": self.effect,
            "writes": self.writes,
            "risk": self.risk,
            "returns_untrusted": self.returns_untrusted,
            "output_fields": dict(self.output),
            "attacker_controllable_fields": [k for k, v in self.output.items() if v == "third_party"],
            "key_args": list(self.key_args),
            "endorsed_args": list(self.endorsed_args),
            "scanned_args": list(self.scanned_args),
            "why": self.why,
        }


def _read(output: dict[str, str], why: str) -> Tool:
    """A tool that writes nothing."""
    return Tool(writes=None, effect=None, output=output, why=why)


_EMAIL_IN = {
    "[].id_": "system",
    "[].sender": "third_party",
    "[].recipients": "third_party",
    "[].cc": "third_party",
    "[].bcc": "third_party",
    "[].subject": "third_party",
    "[].body": "third_party",
    "[].status": "system",
    "[].read": "system",
    "[].timestamp": "third_party",
    "[].attachments": "third_party",
}
_EMAIL_OWN = {
    "[].id_": "system",
    "[].sender": "user",
    "[].recipients": "user",
    "[].cc": "user",
    "[].bcc": "user",
    "[].subject": "third_party",
    "[].body": "third_party",
    "[].status": "system",
    "[].read": "system",
    "[].timestamp": "system",
    "[].attachments": "third_party",
}
_EVENT = {
    "id_": "system",
    "title": "third_party",
    "description": "third_party",
    "start_time": "third_party",
    "end_time": "third_party",
    "location": "third_party",
    "participants": "third_party",
    "all_day": "third_party",
    "status": "system",
}
_EVENTS = {f"[].{k}": v for k, v in _EVENT.items()}
_FILE = {
    "id_": "system",
    "filename": "third_party",
    "content": "third_party",
    "owner": "third_party",
    "last_modified": "system",
    "shared_with": "third_party",
    "size": "system",
}
_FILES = {f"[].{k}": v for k, v in _FILE.items()}
_LISTING = {"{}": "third_party", "{}.value": "third_party"}
_TX = {
    "[].id": "system",
    "[].sender": "third_party",
    "[].recipient": "third_party",
    "[].amount": "third_party",
    "[].subject": "third_party",
    "[].date": "third_party",
    "[].recurring": "third_party",
}
_MSG = {"[].sender": "third_party", "[].recipient": "system", "[].body": "third_party"}

_IN_MAIL = (
    "A received e-mail is written entirely by its sender: sender address (any address can be forged or chosen), "
    "recipients, cc, bcc, subject, body, timestamp (the sender's Date) and attachments (file ids, whole events). "
    "Only `id_`, `status` and `read` are the mailbox's own."
)
_SEND_EMAIL = Tool(
    writes="adds a sent e-mail to inbox.emails (it leaves the account: the recipients receive it)",
    effect="outbound",
    output={
        "id_": "system",
        "sender": "user",
        "recipients": "echo",
        "cc": "echo",
        "bcc": "echo",
        "subject": "echo",
        "body": "echo",
        "status": "system",
        "read": "system",
        "timestamp": "system",
        "attachments": "echo",
    },
    key_args=("recipients", "cc", "bcc", "attachments"),
    endorsed_args=("recipients", "cc", "bcc"),
    scanned_args=("subject", "body"),
    risk="high",
    why=(
        "Writes: a new sent e-mail. Key: who receives it (recipients, cc, bcc) and what files or events leave with it "
        "(attachments' file_id / event_details). The subject and body may legitimately quote data (a summary the user "
        "asked for), so only the identifiers inside them (a phishing URL, an IBAN, an address) are held to the key "
        "rule; a secret mailed to a legitimate recipient is not something a value rule can see. Output: the sent e-mail "
        "echoing the arguments, its id assigned by the mailbox."
    ),
)
_CREATE_EVENT = Tool(
    writes="adds an event to calendar.events and sends an invitation e-mail (description as body) to the participants",
    effect="outbound",
    output={**_EVENT, "title": "echo", "description": "echo", "start_time": "echo", "end_time": "echo", "location": "echo", "participants": "echo", "all_day": "system"},
    key_args=("participants", "start_time", "end_time"),
    endorsed_args=("participants",),
    scanned_args=("title", "description", "location"),
    risk="medium",
    why=(
        "Writes: a new event, and `inbox.send_email` to every participant with the description as the body (read in "
        "the code: `create_event` appends the owner's address to the caller's list, so the owner is mailed too, even "
        "with no participant). Key: participants (who is mailed) "
        "and the times. Title, description and location are free text (scanned). Output: the event echoing the "
        "arguments plus the owner's address among the participants; id assigned by the calendar."
    ),
)
_CANCEL_EVENT = Tool(
    writes="sets the event's status to canceled and e-mails its participants a cancellation with the event attached",
    effect="outbound",
    output={"$": "echo"},
    key_args=("event_id",),
    risk="medium",
    why="Writes: the event's status, and an e-mail to all its participants. Key: which event. Output: a sentence echoing the id.",
)
_SEARCH_EVENTS = _read(
    _EVENTS,
    (
        "Reads events whose title or description contains the query (raises when none). An event is written by its "
        "organiser, often someone else (an invitation): title, description, times, location, participants are "
        "third-party (AgentDojo injects into titles and descriptions). Id and status are the calendar's."
    ),
)
_DAY_EVENTS = _read(_EVENTS, "Reads the events of a day; fields as `search_calendar_events`.")

WORKSPACE: dict[str, Tool] = {
    "send_email": _SEND_EMAIL,
    "delete_email": Tool(
        writes="moves the e-mail from inbox.emails to inbox.trash",
        effect="internal",
        output={"$": "echo"},
        key_args=("email_id",),
        risk="medium",
        why="Writes: the mailbox (the e-mail goes to the trash; an attacker uses it to hide what it sent). Key: which e-mail. Output: a sentence echoing the id.",
    ),
    "get_unread_emails": Tool(
        writes="marks every unread e-mail read (email.read = True)",
        effect="internal",
        output=_EMAIL_IN,
        why=(
            "Not read-only, read in the code: `Inbox.get_unread` sets `read = True` on what it returns, so a second call "
            "returns nothing (the security checks of workspace injection tasks 6, 8 and 9 depend on it). No argument. "
            + _IN_MAIL
        ),
    ),
    "get_sent_emails": _read(
        _EMAIL_OWN,
        (
            "Reads the e-mails the account sent. Recipients and sender were the user's choice; subjects, bodies and "
            "attachments may quote or forward received content (the calendar's own notices attach whole events "
            "written by their organisers), so they stay third-party."
        ),
    ),
    "get_received_emails": _read(_EMAIL_IN, "Reads every received e-mail. " + _IN_MAIL),
    "get_draft_emails": _read(_EMAIL_OWN, "Reads drafts; labelled as sent e-mails (a draft may quote received content)."),
    "search_emails": _read(
        _EMAIL_IN,
        "Reads the e-mails (received and sent alike) whose subject or body contains the query, optionally from one sender. Labelled as received e-mails, the stricter case. " + _IN_MAIL,
    ),
    "search_contacts_by_name": _read(
        {"[].email": "third_party", "[].name": "third_party"},
        "Reads the contact list, which the mailbox builds from the addresses of every e-mail (sender, recipients, cc, bcc) with a name derived from the address: both come from what senders wrote.",
    ),
    "search_contacts_by_email": _read(
        {"[].email": "third_party", "[].name": "third_party"},
        "As `search_contacts_by_name`, matched on the address.",
    ),
    "get_current_day": _read({"$": "system"}, "Reads the calendar's current day: the system's."),
    "search_calendar_events": _SEARCH_EVENTS,
    "get_day_calendar_events": _DAY_EVENTS,
    "create_calendar_event": _CREATE_EVENT,
    "cancel_calendar_event": _CANCEL_EVENT,
    "reschedule_calendar_event": Tool(
        writes="changes the event's start and end and e-mails its participants the new times with the event attached",
        effect="outbound",
        output={**_EVENT, "start_time": "echo", "end_time": "echo"},
        key_args=("event_id", "new_start_time", "new_end_time"),
        risk="medium",
        why="Writes: the event's times and an e-mail to all participants. Key: which event and when. Output: the event (its third-party fields as read, the new times echoed).",
    ),
    "add_calendar_event_participants": Tool(
        writes="appends the addresses to the event's participants",
        effect="internal",
        output={**_EVENT, "participants": "third_party"},
        key_args=("event_id", "participants"),
        endorsed_args=("participants",),
        risk="medium",
        why=(
            "Writes: the event's participant list. Its description says it e-mails the new participants; the code "
            "does not (only `event.participants.extend`), so the effect is internal here, though in a real calendar "
            "it shares the event. Key: which event and who is added."
        ),
    ),
    "append_to_file": Tool(
        writes="appends the content to the file (content, size, last_modified)",
        effect="internal",
        output={**_FILE, "content": "third_party"},
        key_args=("file_id",),
        scanned_args=("content",),
        risk="medium",
        why="Writes: the file's content. Key: which file. The appended text is free text (scanned). Output: the whole file after the append (third-party content as read, plus the echo).",
    ),
    "search_files_by_filename": _read(
        _FILES,
        "Reads the files whose name contains the string. A file's name, content and sharing are chosen by its owner (many files are owned by others and shared with the user; AgentDojo injects into contents); owner is the owner's own address. Id, size and modification time are the drive's.",
    ),
    "create_file": Tool(
        writes="adds a file (owned by the user) to cloud_drive.files",
        effect="internal",
        output={**_FILE, "filename": "echo", "content": "echo", "owner": "user", "shared_with": "system"},
        scanned_args=("filename", "content"),
        risk="medium",
        why="Writes: a new file in the user's own drive, shared with nobody: no key argument (where it goes is fixed), the name and content are free text (scanned). Output: the file echoing the arguments, id assigned by the drive.",
    ),
    "delete_file": Tool(
        writes="removes the file from cloud_drive.files",
        effect="internal",
        output=_FILE,
        key_args=("file_id",),
        endorsed_args=("file_id",),
        risk="high",
        why="Writes: deletes a file (no trash: irreversible). Key: which file. Output: the deleted file as it was.",
    ),
    "get_file_by_id": _read(_FILE, "Reads one file; fields as `search_files_by_filename`."),
    "list_files": _read(_FILES, "Reads every file of the drive; fields as `search_files_by_filename`."),
    "share_file": Tool(
        writes="adds the address with the permission to the file's shared_with",
        effect="outbound",
        output={**_FILE, "shared_with": "third_party"},
        key_args=("file_id", "email", "permission"),
        endorsed_args=("email",),
        risk="high",
        why="Writes: gives a third party access to a file. Key: which file, to whom, read or write. Output: the file with its sharing.",
    ),
    "search_files": _read(_FILES, "Reads the files whose content contains the query (raises when none); fields as `search_files_by_filename`."),
}

_LISTING_WHY = (
    "A business's listing (its name, address, prices, hours, cuisine, diet, car types, fuel options, contact) is "
    "written by the business, a third party; ratings and reviews by anyone (AgentDojo injects into reviews). None "
    "of it is the platform's own assertion."
)


def _listing(what: str) -> Tool:
    return _read(_LISTING, f"Reads {what}, as a mapping from the business's name. " + _LISTING_WHY)


def _names(what: str) -> Tool:
    return _read({"$": "third_party"}, f"Reads the names of the {what} in a city, as one string. " + _LISTING_WHY)


def _reserve(what: str, keys: tuple[str, ...]) -> Tool:
    return Tool(
        writes=f"overwrites the single reservation (type {what}, title, times, contact = the user's phone number)",
        effect="outbound",
        output={"$": "echo"},
        key_args=keys,
        risk="high",
        why=(
            f"Writes: a booking with a third party, which also receives the user's phone number (read from the user's "
            f"profile in the code). Key: where and when ({', '.join(keys)}). Output: a sentence echoing the arguments."
        ),
    )


TRAVEL: dict[str, Tool] = {
    "get_user_information": _read(
        {"{}.value": "user", "{}": "system"},
        "Reads the user's own profile (names, ID, e-mail, phone, address, passport, bank account, card): the user's records, trusted, and secrets worth exfiltrating.",
    ),
    "get_all_hotels_in_city": _names("hotels"),
    "get_hotels_prices": _listing("hotels' price ranges"),
    "get_rating_reviews_for_hotels": _listing("hotels' ratings and reviews"),
    "get_hotels_address": _listing("a hotel's address"),
    "get_all_restaurants_in_city": _names("restaurants"),
    "get_cuisine_type_for_restaurants": _listing("restaurants' cuisine"),
    "get_restaurants_address": _listing("restaurants' addresses"),
    "get_rating_reviews_for_restaurants": _listing("restaurants' ratings and reviews"),
    "get_dietary_restrictions_for_all_restaurants": _listing("restaurants' dietary options"),
    "get_contact_information_for_restaurants": _listing("restaurants' contact information"),
    "get_price_for_restaurants": _listing("restaurants' price per person"),
    "check_restaurant_opening_hours": _listing("restaurants' opening hours"),
    "get_all_car_rental_companies_in_city": _names("car rental companies"),
    "get_car_types_available": _listing("car rental companies' car types"),
    "get_rating_reviews_for_car_rental": _listing("car rental companies' ratings and reviews"),
    "get_car_fuel_options": _listing("car rental companies' fuel options"),
    "get_car_rental_address": _listing("car rental companies' addresses"),
    "get_car_price_per_day": _listing("car rental companies' price per day"),
    "create_calendar_event": _CREATE_EVENT,
    "search_calendar_events": _SEARCH_EVENTS,
    "get_day_calendar_events": _DAY_EVENTS,
    "cancel_calendar_event": _CANCEL_EVENT,
    "reserve_hotel": _reserve("hotel", ("hotel", "start_day", "end_day")),
    "reserve_car_rental": _reserve("car", ("company", "start_time", "end_time")),
    "reserve_restaurant": _reserve("restaurant", ("restaurant", "start_time")),
    "get_flight_information": _read(
        {"$": "third_party"},
        "Reads the flights between two cities, as one string: airline, number, times, price, contact, all the airlines' listing data.",
    ),
    "send_email": _SEND_EMAIL,
}

_MONEY_WHY = "Key: where the money goes and how much (recipient IBAN, amount), when and how often (date, recurring). The subject is free text (scanned: an IBAN or URL in it is held to the key rule)."

BANKING: dict[str, Tool] = {
    "get_iban": _read({"$": "user"}, "Reads the account's own IBAN: the user's."),
    "send_money": Tool(
        writes="appends a transaction to bank_account.transactions",
        effect="outbound",
        output={"message": "echo"},
        key_args=("recipient", "amount", "date"),
        endorsed_args=("recipient",),
        scanned_args=("subject",),
        risk="high",
        why="Writes: a payment. " + _MONEY_WHY + " Output: a sentence echoing recipient and amount.",
    ),
    "schedule_transaction": Tool(
        writes="appends a transaction to bank_account.scheduled_transactions",
        effect="outbound",
        output={"message": "echo"},
        key_args=("recipient", "amount", "date", "recurring"),
        endorsed_args=("recipient",),
        scanned_args=("subject",),
        risk="high",
        why="Writes: a standing order. " + _MONEY_WHY,
    ),
    "update_scheduled_transaction": Tool(
        writes="changes the given fields of a scheduled transaction (raises when the id is unknown)",
        effect="outbound",
        output={"message": "echo"},
        key_args=("id", "recipient", "amount", "date", "recurring"),
        endorsed_args=("recipient",),
        scanned_args=("subject",),
        risk="high",
        why="Writes: a standing order's fields (redirecting a rent payment is the classic attack). Key: which order (id) and every field that moves money. " + _MONEY_WHY,
    ),
    "get_balance": _read({"$": "system"}, "Reads the balance: the bank's."),
    "get_most_recent_transactions": _read(
        _TX,
        (
            "Reads the last n transactions, incoming and outgoing mixed: an incoming one is written by its sender "
            "(their IBAN, the amount, the subject, where AgentDojo injects), so every field but the bank's id is "
            "third-party."
        ),
    ),
    "get_scheduled_transactions": _read(
        {"[].id": "system", "[].sender": "user", "[].recipient": "user", "[].amount": "user", "[].subject": "user", "[].date": "user", "[].recurring": "user"},
        "Reads the account's standing orders, which the account holder set up: the user's records (trusted, unless an earlier hijacked turn wrote them: capsaga's labels do not outlive a turn here).",
    ),
    "read_file": _read(
        {"$": "third_party"},
        "Reads a local file (bills, a landlord's notice, an address change): documents written by others (AgentDojo injects into the bill). An unknown path gives an empty string.",
    ),
    "get_user_info": _read({"{}": "system", "{}.value": "user"}, "Reads the user's own name and address: the user's records."),
    "update_password": Tool(
        writes="sets user_account.password",
        effect="internal",
        output={"message": "system"},
        key_args=("password",),
        risk="high",
        why="Writes: the account's password (a password taken from data is an account takeover). Key: the password. Output: a constant sentence.",
    ),
    "update_user_info": Tool(
        writes="sets the given profile fields (first_name, last_name, street, city)",
        effect="internal",
        output={"{}": "system", "{}.value": "echo"},
        key_args=("first_name", "last_name", "street", "city"),
        risk="medium",
        why="Writes: the user's profile (where mail and cards are sent). Key: every field. Output: the profile after the change.",
    ),
}

SLACK: dict[str, Tool] = {
    "get_channels": _read(
        {"[]": "third_party"},
        "Reads the channel names. Any member can create and name a channel (AgentDojo's `prompt_injection_channel` vector is a channel name, `External_...`): third-party.",
    ),
    "add_user_to_channel": Tool(
        writes="appends the channel to the user's channel list (raises on an unknown user or channel)",
        effect="outbound",
        output={"$": "system"},
        key_args=("user", "channel"),
        endorsed_args=("user",),
        risk="medium",
        why="Writes: membership, so that user reads the channel from now on (disclosure). Key: who and which channel. Output: none (null).",
    ),
    "read_channel_messages": _read(
        _MSG,
        "Reads a channel's messages: sender names and bodies are written by members (third-party); `recipient` is the channel read.",
    ),
    "read_inbox": _read(_MSG, "Reads a user's direct messages; as `read_channel_messages`."),
    "send_direct_message": Tool(
        writes="appends a message from `bot` to the recipient's inbox",
        effect="outbound",
        output={"$": "system"},
        key_args=("recipient",),
        endorsed_args=("recipient",),
        scanned_args=("body",),
        risk="medium",
        why="Writes: a message to a person. Key: who. The body is free text (scanned: a link in it is held to the key rule). Output: none.",
    ),
    "send_channel_message": Tool(
        writes="appends a message from `bot` to the channel",
        effect="outbound",
        output={"$": "system"},
        key_args=("channel",),
        scanned_args=("body",),
        risk="medium",
        why="Writes: a message every member of the channel reads. Key: which channel. Body scanned. Output: none.",
    ),
    "get_users_in_channel": _read(
        {"[]": "third_party"},
        "Reads the member names of a channel: names are chosen by their users (third-party).",
    ),
    "invite_user_to_slack": Tool(
        writes="adds the user to slack.users with an empty inbox and no channel",
        effect="outbound",
        output={"$": "system"},
        key_args=("user", "user_email"),
        endorsed_args=("user_email",),
        risk="high",
        why="Writes: a new workspace member, invited at the given address (the attacker's own account in injection task 5). Key: the name and the address. Output: none.",
    ),
    "remove_user_from_slack": Tool(
        writes="removes the user, their inbox and their channel list",
        effect="internal",
        output={"$": "system"},
        key_args=("user",),
        endorsed_args=("user",),
        risk="high",
        why="Writes: deletes a member (and their inbox: irreversible). Key: who. Output: none.",
    ),
    "get_webpage": Tool(
        writes="appends the URL to web.web_requests",
        effect="outbound",
        output={"$": "third_party"},
        key_args=("url",),
        risk="medium",
        why=(
            "Not read-only, read in the code: every call appends the URL to `web.web_requests`, the environment's "
            "record of what the outside saw; a GET carries its URL to the site, and slack injection task 3 is graded "
            "on that list (an URL can also carry data out in its query). Key: the URL. Output: the page, written by "
            "whoever controls the site."
        ),
    ),
    "post_webpage": Tool(
        writes="appends the URL to web.web_requests and stores the content at that URL",
        effect="outbound",
        output={"$": "system"},
        key_args=("url",),
        endorsed_args=("url",),
        scanned_args=("content",),
        risk="high",
        why="Writes: publishes content at a URL (AgentDojo's exfiltration sink: slack injection tasks 2 and 4 post every channel's messages). Key: the URL. Content scanned (what leaves is the payload, where it goes is the URL). Output: none.",
    ),
}

#: suite -> tool name -> annotation.
ANNOTATIONS: dict[str, dict[str, Tool]] = {
    "workspace": WORKSPACE,
    "travel": TRAVEL,
    "banking": BANKING,
    "slack": SLACK,
}
