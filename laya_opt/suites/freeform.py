"""The `freeform` suite: support tickets written as people write them, by hand, with the README's questions.

    python -m laya_opt.suites.freeform [--check]

Every other suite is generated from templates: a topic sentence ("My question is about delivery."), filler
sentences, a stated urgency. A model can score well on all of them by keying on the generator's phrasing, and
still misread a plain "I forgot my password and cannot log in." (run 8 of the stand-in answered `billing` to
nearly every such ticket; checkpoints/laya-tiny/TRAINING.md). These tickets are hand-written in four languages,
each with the three questions of `examples/questions.json` (department, urgency, call back) in its language.
The suite is reported (`suite_report`), never trained or tuned on, and no generator draws from it.
`--check` compares the file on disk with a fresh build and exits 1 on a difference.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from laya_opt.suites.suite_file import QuestionTag, SuiteRecord, dump_suite
from laya_opt.util.resources import suites_dir

NAME = "freeform"
DESCRIPTION = ("Hand-written free-form support tickets (en, de, fr, es) with the README's three questions: "
               "department, urgency, call back. Reported, never tuned on.")

DEPARTMENTS = ("billing", "account", "shipping")


def _questions(department: str, descriptions: tuple[str, str, str], urgency: str, levels: list[str],
               callback: str) -> dict:
    """The README's three questions in one language: department (choice), urgency (score), call back (noul)."""
    return {"department": {"type": "choice", "instructions": department,
                           "criteria": dict(zip(DEPARTMENTS, descriptions))},
            "urgency": {"type": "score", "instructions": urgency, "criteria": levels},
            "callback": {"type": "noul", "instructions": callback}}


QUESTIONS = {
    "en": _questions("Which team should handle this ticket?", ("invoice, payment", "password, login",
                     "delivery, courier"), "How urgent is this?", ["minor", "serious", "critical"],
                     "The customer wants a call back."),
    "de": _questions("Welches Team soll dieses Ticket bearbeiten?", ("Rechnung, Zahlung", "Passwort, Anmeldung",
                     "Lieferung, Kurier"), "Wie dringend ist das?", ["geringfügig", "ernst", "kritisch"],
                     "Der Kunde möchte einen Rückruf."),
    "fr": _questions("Quelle équipe doit traiter ce ticket ?", ("facture, paiement", "mot de passe, connexion",
                     "livraison, transporteur"), "Quelle est l'urgence ?", ["mineure", "sérieuse", "critique"],
                     "Le client souhaite être rappelé."),
    "es": _questions("¿Qué equipo debe atender este ticket?", ("factura, pago", "contraseña, acceso",
                     "entrega, mensajero"), "¿Qué tan urgente es?", ["menor", "grave", "crítico"],
                     "El cliente quiere que le devuelvan la llamada."),
}

# (language, ticket, department, urgency 0-2, wants a call back)
TICKETS = (
    ("en", "My parcel never arrived and the courier does not answer. It is a minor issue. Please do not call me "
           "back.", "shipping", 0, False),
    ("en", "I was charged twice for the same order this month. This is serious, please call me back today.",
     "billing", 1, True),
    ("en", "I forgot my password and the reset email never comes, so I cannot log in at all. Our whole team is "
           "blocked, this is critical. Call me as soon as you can.", "account", 2, True),
    ("en", "The tracking page has said 'out for delivery' for five days. No rush, just let me know by email.",
     "shipping", 0, False),
    ("en", "Your invoice lists a discount that was never applied to the payment. Not urgent. Email is fine, no "
           "phone calls please.", "billing", 0, False),
    ("en", "Someone changed the email address on my account and I can no longer sign in. I think I was hacked. "
           "Please phone me right away.", "account", 2, True),
    ("en", "The box arrived crushed and half the items are broken. I need the replacement before Friday's event, "
           "so this is serious. A call would help.", "shipping", 1, True),
    ("en", "Could you send me a corrected invoice with our VAT number on it? Whenever you have a moment.",
     "billing", 0, False),
    ("en", "Two-factor codes stopped arriving on my phone and I'm locked out of my login. It's annoying but I can "
           "wait. Please don't call, I'm in meetings all day.", "account", 0, False),
    ("en", "The courier left my package at the wrong address and the neighbours say they never got it. It had "
           "medicine inside, this is critical. Please ring me back.", "shipping", 2, True),
    ("en", "My card payment failed three times and now the subscription is suspended. It's a serious problem "
           "for us. I'd like a call back.", "billing", 1, True),
    ("en", "How do I change the password on my account? Minor question, reply by mail please.", "account", 0,
     False),
    ("de", "Mein Paket ist seit zwei Wochen unterwegs und der Kurier meldet sich nicht. Nicht dringend. Bitte "
           "rufen Sie mich nicht an.", "shipping", 0, False),
    ("de", "Auf der Rechnung steht ein falscher Betrag, wir haben zu viel gezahlt. Das ist ernst. Bitte rufen "
           "Sie mich zurück.", "billing", 1, True),
    ("de", "Ich kann mich nicht anmelden, das Passwort wird immer abgelehnt. Unser Shop steht still, das ist "
           "kritisch. Rufen Sie mich bitte sofort an.", "account", 2, True),
    ("de", "Die Lieferung kam beschädigt an, zwei Teller sind zerbrochen. Eine kurze Antwort per E-Mail reicht, "
           "kein Anruf nötig.", "shipping", 0, False),
    ("de", "Die Zahlung per Lastschrift wurde doppelt abgebucht. Bitte um Rückruf, das ist ernst.", "billing", 1,
     True),
    ("de", "Mein Konto wurde gesperrt und ich komme nicht mehr an meine Daten. Bitte keinen Anruf, schreiben Sie "
           "mir einfach.", "account", 1, False),
    ("fr", "Mon colis n'est jamais arrivé et le transporteur ne répond pas. Ce n'est pas urgent. Merci de ne pas "
           "me rappeler.", "shipping", 0, False),
    ("fr", "J'ai été débité deux fois pour la même facture. C'est sérieux, rappelez-moi s'il vous plaît.",
     "billing", 1, True),
    ("fr", "Impossible de me connecter, mon mot de passe ne fonctionne plus et toute l'équipe est bloquée. C'est "
           "critique, appelez-moi dès que possible.", "account", 2, True),
    ("fr", "La livraison a trois jours de retard. Rien de grave, une réponse par courriel suffit.", "shipping", 0,
     False),
    ("fr", "Pouvez-vous m'envoyer le détail du paiement de mars ? Pas pressé, et pas besoin de m'appeler.",
     "billing", 0, False),
    ("fr", "Quelqu'un a modifié l'adresse de mon compte et je ne peux plus me connecter. C'est grave, merci de "
           "me téléphoner.", "account", 2, True),
    ("es", "Mi paquete nunca llegó y el mensajero no contesta. Es un tema menor. Por favor, no me llamen.",
     "shipping", 0, False),
    ("es", "Me cobraron dos veces la misma factura. Es grave, por favor llámenme.", "billing", 1, True),
    ("es", "No puedo entrar en mi cuenta, la contraseña ya no funciona y tenemos la tienda parada. Es crítico, "
           "llámenme cuanto antes.", "account", 2, True),
    ("es", "La entrega llegó con la caja rota y falta un artículo. No es urgente, respondan por correo, sin "
           "llamadas.", "shipping", 0, False),
    ("es", "El pago con tarjeta fue rechazado pero el dinero salió de mi cuenta bancaria. Es grave, quiero que "
           "me devuelvan la llamada.", "billing", 1, True),
    ("es", "¿Cómo cambio el correo de acceso de mi cuenta? Es una duda menor, no hace falta llamar.", "account",
     0, False),
)


def _length_class(text: str) -> str:
    return "short" if len(text) < 120 else "medium" if len(text) < 240 else "long"


def build_records() -> list[SuiteRecord]:
    records = []
    for index, (language, ticket, department, urgency, callback) in enumerate(TICKETS):
        questions = QUESTIONS[language]
        length = _length_class(ticket)
        tags = {qid: QuestionTag(type=question["type"], language=language,
                                 options=len(question.get("criteria") or (0, 0)), length_class=length)
                for qid, question in questions.items()}
        records.append(SuiteRecord(id=f"{NAME}-{index:04d}", state=ticket, questions=questions,
                                   labels={"department": department, "urgency": urgency, "callback": callback},
                                   tags=tags))
    return records


def build() -> bytes:
    return dump_suite(NAME, build_records(), generator_seed=None, description=DESCRIPTION)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=suites_dir())
    parser.add_argument("--check", action="store_true", help="compare with the file on disk, write nothing")
    args = parser.parse_args(argv)
    path, data = args.out / f"{NAME}.jsonl", build()
    if args.check:
        if not path.is_file() or path.read_bytes() != data:
            print(f"stale suite file: {path}", file=sys.stderr)
            return 1
        return 0
    path.write_bytes(data)
    print(f"wrote {path} ({len(data)} bytes, {len(TICKETS)} records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
