"""Paraphrased noul statements: each lexicon fact said in new words, one set per wording.

Standard training noul questions ask about `lexicon.FACTS[...].statement` (or its negation) inside a frame,
and so do `heldout` questions: with the frame removed, they are training strings. The `train_paraphrased`
(hard-case training stream only), `validation` and `heldout` sets below rephrase every statement. They keep the fact's content word (refund, screenshot,
card, ...), which the state sentence also uses, and change the subject and the construction. So no
paraphrase equals a lexicon statement or another set's paraphrase, and the fact stays recognisable to
a model that learned it from the lexicon's sentences.
"""
from __future__ import annotations

from dataclasses import dataclass

from laya_opt.suites.synthetic.lexicon import FACTS, _parse_per_lang


@dataclass(frozen=True)
class Paraphrase:
    statement: str
    negation: str


def _parse(tables: dict[str, str]) -> dict[str, dict[str, Paraphrase]]:
    parsed = {fid: {lang: Paraphrase(*items) for lang, items in _parse_per_lang(table, 2).items()}
              for fid, table in tables.items()}
    if set(parsed) != set(FACTS):
        raise ValueError(f"paraphrases cover facts {sorted(parsed)}, the lexicon has {sorted(FACTS)}")
    return parsed


_VALIDATION = {
    "refund": """
en=The user requests a refund.|The user does not request a refund.
de=Der Nutzer fordert eine Rückerstattung.|Der Nutzer fordert keine Rückerstattung.
fr=L'utilisateur réclame un remboursement.|L'utilisateur ne réclame pas de remboursement.
es=El usuario solicita un reembolso.|El usuario no solicita un reembolso.
ru=Пользователь требует вернуть деньги.|Пользователь не требует вернуть деньги.
zh=用户提出退款。|用户没有提出退款。
ja=ユーザーは返金を求めている。|ユーザーは返金を求めていない。
hi=उपयोगकर्ता रिफंड की माँग कर रहा है।|उपयोगकर्ता रिफंड की माँग नहीं कर रहा है।
""",
    "screenshot": """
en=The user sent a screenshot along.|The user did not send a screenshot along.
de=Der Nutzer hat einen Screenshot mitgeschickt.|Der Nutzer hat keinen Screenshot mitgeschickt.
fr=L'utilisateur a envoyé une capture d'écran.|L'utilisateur n'a pas envoyé de capture d'écran.
es=El usuario envió una captura.|El usuario no envió ninguna captura.
ru=Пользователь прислал скриншот.|Пользователь не прислал скриншот.
zh=用户发来了截图。|用户没有发来截图。
ja=ユーザーはスクリーンショットを送ってきた。|ユーザーはスクリーンショットを送ってこなかった。
hi=उपयोगकर्ता ने स्क्रीनशॉट भेजा है।|उपयोगकर्ता ने स्क्रीनशॉट नहीं भेजा है।
""",
    "card_blocked": """
en=The user's card is currently blocked.|The user's card is currently not blocked.
de=Die Karte des Nutzers ist derzeit gesperrt.|Die Karte des Nutzers ist derzeit nicht gesperrt.
fr=La carte de l'utilisateur est actuellement bloquée.|La carte de l'utilisateur n'est actuellement pas bloquée.
es=La tarjeta del usuario está bloqueada ahora.|La tarjeta del usuario no está bloqueada ahora.
ru=Карта пользователя сейчас заблокирована.|Карта пользователя сейчас не заблокирована.
zh=用户的卡现在被冻结了。|用户的卡现在没有被冻结。
ja=ユーザーのカードは今、停止中だ。|ユーザーのカードは今、停止されていない。
hi=उपयोगकर्ता का कार्ड अभी ब्लॉक है।|उपयोगकर्ता का कार्ड अभी ब्लॉक नहीं है।
""",
    "callback": """
en=The user asks to be called back.|The user asks not to be called back.
de=Der Nutzer bittet um Rückruf.|Der Nutzer bittet, nicht zurückgerufen zu werden.
fr=L'utilisateur demande à être rappelé.|L'utilisateur demande à ne pas être rappelé.
es=El usuario desea que lo llamen.|El usuario desea que no lo llamen.
ru=Пользователь просит перезвонить.|Пользователь просит не перезванивать.
zh=用户想要回电。|用户不想要回电。
ja=ユーザーは折り返しの連絡を求めている。|ユーザーは折り返しの連絡を求めていない。
hi=उपयोगकर्ता को वापस कॉल चाहिए।|उपयोगकर्ता को वापस कॉल नहीं चाहिए।
""",
    "happened_before": """
en=The same thing happened before.|The same thing never happened before.
de=Das Gleiche ist schon früher passiert.|Das Gleiche ist noch nie passiert.
fr=La même chose est déjà arrivée avant.|La même chose n'est jamais arrivée avant.
es=Lo mismo ya ocurrió antes.|Lo mismo nunca ocurrió antes.
ru=То же самое уже бывало раньше.|То же самое раньше не бывало.
zh=相同的事以前发生过。|相同的事以前没发生过。
ja=同じ問題は前にも起きた。|同じ問題は前には起きなかった。
hi=यही बात पहले भी हो चुकी है।|यही बात पहले कभी नहीं हुई।
""",
    "cancel": """
en=The user wishes to cancel the order.|The user does not wish to cancel the order.
de=Der Nutzer will seine Bestellung stornieren.|Der Nutzer will seine Bestellung nicht stornieren.
fr=L'utilisateur veut annuler sa commande.|L'utilisateur ne veut pas annuler sa commande.
es=El usuario quiere cancelar su pedido.|El usuario no quiere cancelar su pedido.
ru=Пользователь хочет отменить свой заказ.|Пользователь не хочет отменять свой заказ.
zh=用户要取消订单。|用户不要取消订单。
ja=ユーザーは注文をキャンセルしたがっている。|ユーザーは注文をキャンセルしたがっていない。
hi=उपयोगकर्ता अपना ऑर्डर रद्द करना चाहता है।|उपयोगकर्ता अपना ऑर्डर रद्द नहीं करना चाहता।
""",
    "premium": """
en=The user has premium membership.|The user has no premium membership.
de=Der Nutzer ist ein Premium-Mitglied.|Der Nutzer ist kein Premium-Mitglied.
fr=L'utilisateur est un membre premium.|L'utilisateur n'est pas un membre premium.
es=El usuario es socio premium.|El usuario no es socio premium.
ru=Пользователь является премиум-участником.|Пользователь не является премиум-участником.
zh=该用户属于高级会员。|该用户不属于高级会员。
ja=ユーザーはプレミアム会員です。|ユーザーはプレミアム会員ではありません。
hi=उपयोगकर्ता एक प्रीमियम सदस्य है।|उपयोगकर्ता एक प्रीमियम सदस्य नहीं है।
""",
    "restart": """
en=The user has already tried a restart.|The user has not tried a restart yet.
de=Der Nutzer hat schon einen Neustart probiert.|Der Nutzer hat noch keinen Neustart probiert.
fr=L'utilisateur a déjà redémarré.|L'utilisateur n'a pas encore redémarré.
es=El usuario ya ha reiniciado.|El usuario todavía no ha reiniciado.
ru=Пользователь уже делал перезагрузку.|Пользователь ещё не делал перезагрузку.
zh=用户已经试过重启。|用户还没试过重启。
ja=ユーザーはすでに再起動を試している。|ユーザーはまだ再起動を試していない。
hi=उपयोगकर्ता रीस्टार्ट करके देख चुका है।|उपयोगकर्ता ने अभी तक रीस्टार्ट नहीं किया है।
""",
}

_HELDOUT = {
    "refund": """
en=A refund is what the writer is after.|A refund is not what the writer is after.
de=Eine Rückerstattung ist das, was der Absender möchte.|Eine Rückerstattung ist nicht das, was der Absender möchte.
fr=Un remboursement, voilà ce que l'expéditeur demande.|Un remboursement n'est pas ce que l'expéditeur demande.
es=Un reembolso es lo que busca el remitente.|Un reembolso no es lo que busca el remitente.
ru=Автор сообщения хочет вернуть деньги.|Автор сообщения не хочет вернуть деньги.
zh=写信人想要退款。|写信人不想要退款。
ja=送り主は返金を希望している。|送り主は返金を希望していない。
hi=लिखने वाले को रिफंड चाहिए।|लिखने वाले को रिफंड नहीं चाहिए।
""",
    "screenshot": """
en=A screenshot came with the message.|No screenshot came with the message.
de=Der Nachricht liegt ein Screenshot bei.|Der Nachricht liegt kein Screenshot bei.
fr=Une capture d'écran accompagne le message.|Aucune capture d'écran n'accompagne le message.
es=El mensaje trae una captura.|El mensaje no trae ninguna captura.
ru=К сообщению приложен скриншот.|К сообщению не приложен скриншот.
zh=消息里附有截图。|消息里没有附截图。
ja=メッセージにはスクリーンショットが添付されている。|メッセージにはスクリーンショットが添付されていない。
hi=संदेश के साथ स्क्रीनशॉट लगा है।|संदेश के साथ स्क्रीनशॉट नहीं लगा है।
""",
    "card_blocked": """
en=The writer's card has been blocked.|The writer's card has not been blocked.
de=Die Karte des Absenders wurde gesperrt.|Die Karte des Absenders wurde nicht gesperrt.
fr=La carte de l'expéditeur a été bloquée.|La carte de l'expéditeur n'a pas été bloquée.
es=La tarjeta del remitente ha sido bloqueada.|La tarjeta del remitente no ha sido bloqueada.
ru=Карту автора заблокировали.|Карту автора не заблокировали.
zh=写信人的卡已被冻结。|写信人的卡没被冻结。
ja=送り主のカードは停止された。|送り主のカードは停止されなかった。
hi=लिखने वाले का कार्ड ब्लॉक कर दिया गया है।|लिखने वाले का कार्ड ब्लॉक नहीं किया गया है।
""",
    "callback": """
en=The writer would like to be called back.|The writer would not like to be called back.
de=Der Absender möchte zurückgerufen werden.|Der Absender möchte nicht zurückgerufen werden.
fr=L'expéditeur aimerait qu'on le rappelle.|L'expéditeur n'aimerait pas qu'on le rappelle.
es=El remitente pide que lo llamen.|El remitente pide que no lo llamen.
ru=Автор просит ему перезвонить.|Автор просит ему не перезванивать.
zh=写信人请求回电。|写信人请求不要回电。
ja=送り主は折り返しの電話を望んでいる。|送り主は折り返しの電話を望んでいない。
hi=लिखने वाला चाहता है कि उसे वापस कॉल किया जाए।|लिखने वाला नहीं चाहता कि उसे वापस कॉल किया जाए।
""",
    "happened_before": """
en=This issue has occurred before.|This issue has never occurred before.
de=Dieses Problem gab es schon früher.|Dieses Problem gab es noch nie.
fr=Ce souci est déjà arrivé auparavant.|Ce souci n'est jamais arrivé auparavant.
es=Esto ya había pasado antes.|Esto nunca había pasado antes.
ru=Такое случалось и раньше.|Такого раньше не случалось.
zh=这种情况以前也发生过。|这种情况以前没发生过。
ja=同じことは前にもあった。|同じことは前にはなかった。
hi=यह दिक्कत पहले भी हुई थी।|यह दिक्कत पहले कभी नहीं हुई थी।
""",
    "cancel": """
en=The writer intends to cancel the order.|The writer does not intend to cancel the order.
de=Der Absender möchte die Bestellung stornieren.|Der Absender möchte die Bestellung nicht stornieren.
fr=L'expéditeur souhaite annuler la commande.|L'expéditeur ne souhaite pas annuler la commande.
es=El remitente desea cancelar el pedido.|El remitente no desea cancelar el pedido.
ru=Автор собирается отменить заказ.|Автор не собирается отменять заказ.
zh=写信人要求取消订单。|写信人不要求取消订单。
ja=送り主は注文をキャンセルするつもりだ。|送り主は注文をキャンセルするつもりはない。
hi=लिखने वाला ऑर्डर रद्द करवाना चाहता है।|लिखने वाला ऑर्डर रद्द नहीं करवाना चाहता।
""",
    "premium": """
en=The writer holds a premium membership.|The writer does not hold a premium membership.
de=Der Absender hat eine Premium-Mitgliedschaft.|Der Absender hat keine Premium-Mitgliedschaft.
fr=L'expéditeur fait partie des membres premium.|L'expéditeur ne fait pas partie des membres premium.
es=El remitente tiene una membresía premium.|El remitente no tiene una membresía premium.
ru=У автора есть премиум-статус.|У автора нет премиум-статуса.
zh=写信人是一位高级会员。|写信人不是高级会员。
ja=送り主はプレミアム会員である。|送り主はプレミアム会員ではない。
hi=लिखने वाला प्रीमियम सदस्य है।|लिखने वाला प्रीमियम सदस्य नहीं है।
""",
    "restart": """
en=A restart has already been tried by the writer.|A restart has not yet been tried by the writer.
de=Einen Neustart hat der Absender bereits probiert.|Einen Neustart hat der Absender noch nicht probiert.
fr=L'expéditeur a déjà tenté un redémarrage.|L'expéditeur n'a pas encore tenté de redémarrage.
es=El remitente ya probó a reiniciar.|El remitente todavía no ha probado a reiniciar.
ru=Автор уже пытался перезагрузить.|Автор ещё не пытался перезагрузить.
zh=写信人已经重启过了。|写信人还没重启过。
ja=送り主はもう再起動してみた。|送り主はまだ再起動していない。
hi=लिखने वाला रीस्टार्ट करके देख चुका है।|लिखने वाले ने अभी रीस्टार्ट नहीं किया है।
""",
}

# The training wording: a third phrasing, used by the `train_paraphrased` hard-case split only
# (train_standin.py --training-paraphrases; no shipped suite draws from it). Without it every training noul question states a fact in the lexicon's one
# sentence, and held-out paraphrases are wordings the model never saw a fact in. Its subject is a third one
# (the sender), and some negations carry no negation word ("the first time").
_TRAINING = {
    "refund": """
en=The sender wants a refund.|The sender does not want a refund.
de=Die Person will eine Rückerstattung.|Die Person will keine Rückerstattung.
fr=La personne veut un remboursement.|La personne ne veut pas de remboursement.
es=La persona quiere un reembolso.|La persona no quiere un reembolso.
ru=Отправитель хочет получить свои деньги обратно.|Отправитель не хочет получать деньги обратно.
zh=发件人希望退款。|发件人不希望退款。
ja=差出人は返金してほしいと思っている。|差出人は返金を望んでいない。
hi=भेजने वाला रिफंड लेना चाहता है।|भेजने वाला रिफंड नहीं लेना चाहता है।
""",
    "screenshot": """
en=The sender included a screenshot.|The sender did not include a screenshot.
de=Die Person hat einen Screenshot beigefügt.|Die Person hat keinen Screenshot beigefügt.
fr=La personne a ajouté une capture d'écran.|La personne n'a pas ajouté de capture d'écran.
es=La persona incluyó una captura.|La persona no incluyó ninguna captura.
ru=Отправитель добавил скриншот.|Отправитель не добавил скриншот.
zh=发件人附带了一张截图。|发件人没有附带截图。
ja=差出人はスクリーンショットを付けてくれた。|差出人はスクリーンショットを付けていない。
hi=भेजने वाले ने स्क्रीनशॉट जोड़ा है।|भेजने वाले ने स्क्रीनशॉट नहीं जोड़ा है।
""",
    "card_blocked": """
en=The sender has a blocked card.|The sender does not have a blocked card.
de=Die Person hat eine gesperrte Karte.|Die Person hat keine gesperrte Karte.
fr=La personne a une carte bloquée.|La personne n'a pas de carte bloquée.
es=La persona tiene la tarjeta bloqueada.|La persona no tiene la tarjeta bloqueada.
ru=У отправителя заблокирована карта.|У отправителя не заблокирована карта.
zh=发件人的卡处于冻结状态。|发件人的卡不处于冻结状态。
ja=差出人はカードを止められている。|差出人はカードを止められていない。
hi=भेजने वाले के कार्ड पर ब्लॉक लगा है।|भेजने वाले के कार्ड पर ब्लॉक नहीं लगा है।
""",
    "callback": """
en=The sender asks for a return call.|The sender does not ask for a return call.
de=Die Person bittet um einen Rückruf.|Die Person bittet um keinen Rückruf.
fr=La personne attend qu'on la rappelle.|La personne n'attend pas qu'on la rappelle.
es=La persona quiere que la llamen de vuelta.|La persona no quiere que la llamen de vuelta.
ru=Отправителю нужно, чтобы ему перезвонили.|Отправителю не нужно, чтобы ему перезвонили.
zh=发件人等待回电。|发件人不需要回电。
ja=差出人は折り返しの電話を待っている。|差出人は折り返しの電話を待っていない。
hi=भेजने वाला वापस कॉल का इंतज़ार कर रहा है।|भेजने वाला वापस कॉल का इंतज़ार नहीं कर रहा है।
""",
    "happened_before": """
en=It is not the first time this has happened to the sender.|It is the first time this has happened to the sender.
de=Der Person ist das schon einmal passiert.|Der Person ist das noch nie passiert.
fr=Cela est déjà arrivé à la personne.|Cela n'est jamais arrivé à la personne.
es=A la persona ya le pasó esto antes.|A la persona nunca le pasó esto antes.
ru=С отправителем такое уже случалось.|С отправителем такое ещё не случалось.
zh=发件人之前就遇到过这种情况。|发件人之前从没遇到过这种情况。
ja=差出人には以前にも同じことがあった。|差出人には以前に同じことはなかった。
hi=भेजने वाले के साथ ऐसा पहले भी हो चुका है।|भेजने वाले के साथ ऐसा पहले कभी नहीं हुआ है।
""",
    "cancel": """
en=The sender asks to cancel the order.|The sender does not ask to cancel the order.
de=Die Person bittet um Stornierung der Bestellung.|Die Person bittet nicht um Stornierung der Bestellung.
fr=La personne demande l'annulation de la commande.|La personne ne demande pas l'annulation de la commande.
es=La persona pide anular el pedido.|La persona no pide anular el pedido.
ru=Отправитель просит отменить заказ.|Отправитель не просит отменить заказ.
zh=发件人请求把订单取消。|发件人没有请求取消订单。
ja=差出人は注文の取り消しを頼んでいる。|差出人は注文の取り消しを頼んでいない。
hi=भेजने वाला ऑर्डर कैंसिल करवाना चाहता है।|भेजने वाला ऑर्डर कैंसिल नहीं करवाना चाहता है।
""",
    "premium": """
en=The sender belongs to the premium members.|The sender does not belong to the premium members.
de=Die Person gehört zu den Premium-Mitgliedern.|Die Person gehört nicht zu den Premium-Mitgliedern.
fr=La personne a un abonnement premium.|La personne n'a pas d'abonnement premium.
es=La persona es cliente premium.|La persona no es cliente premium.
ru=Отправитель пользуется премиум-статусом.|Отправитель не пользуется премиум-статусом.
zh=发件人拥有高级会员资格。|发件人没有高级会员资格。
ja=差出人はプレミアム会員に入っている。|差出人はプレミアム会員に入っていない。
hi=भेजने वाला प्रीमियम सदस्यों में शामिल है।|भेजने वाला प्रीमियम सदस्यों में शामिल नहीं है।
""",
    "restart": """
en=The sender already gave a restart a try.|The sender has not given a restart a try yet.
de=Die Person hat es bereits mit einem Neustart versucht.|Die Person hat es noch nicht mit einem Neustart versucht.
fr=La personne a déjà tenté de redémarrer.|La personne n'a pas encore tenté de redémarrer.
es=La persona ya hizo la prueba de reiniciar.|La persona todavía no hizo la prueba de reiniciar.
ru=Отправитель уже выполнял перезагрузку.|Отправитель ещё не выполнял перезагрузку.
zh=发件人重启过一次了。|发件人一次也没重启过。
ja=差出人は再起動をすでにやってみた。|差出人は再起動をまだやっていない。
hi=भेजने वाला रीस्टार्ट पहले ही आज़मा चुका है।|भेजने वाले ने रीस्टार्ट अभी तक नहीं आज़माया है।
""",
}

# Hard-case split (hard_cases.HARD_SPLITS) -> fact id -> language -> paraphrase. `train` asks about the lexicon's
# own statements; `train_paraphrased` in the training paraphrases.
PARAPHRASES: dict[str, dict[str, dict[str, Paraphrase]]] = {"train_paraphrased": _parse(_TRAINING),
                                                            "validation": _parse(_VALIDATION),
                                                            "heldout": _parse(_HELDOUT)}
