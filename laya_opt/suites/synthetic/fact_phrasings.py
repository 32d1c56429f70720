"""Yes/no facts stated in free words: a training table (train_standin.py --fact-phrasings) and a validation
table (the `phrasings` suite), written apart from each other and from every shipped suite.

Every other state says a fact in one sentence per language and polarity (`lexicon.FACTS`: "Please call me
back." / "Please do not call me back."), so a model can answer a noul question by matching that sentence.
Runs 9 and 12 of the stand-in read the hand-written `freeform` tickets' call-back requests backwards: "phone
me right away" as no call-back, a refusal of calls as a call-back (checkpoints/laya-tiny/TRAINING.md). The
tables below say each of the eight facts as people do (imperatives, refusals, what was done, what was not)
with other words than the lexicon's. The training table widens the training stream; the validation table
and `PROBE_URGENCY` build `phrasings`, which training decisions may read (--also-validate) and which is
never trained on. No sentence of either table repeats one of a shipped suite, and none names a cue or a
scale term (tests/suites/test_fact_phrasings.py), so a phrase carries its fact and nothing else.

Written after reading what `freeform`'s errors have in common, never its sentences: `freeform` stays the
judge of whether the phenomenon was learnt, but it is no longer blind to which phenomenon was looked at.
"""
from __future__ import annotations

import dataclasses

from laya_opt.suites.synthetic.lexicon import FACTS, LANGUAGES
from laya_opt.suites.synthetic.templates import TemplateGroup, _table


def _states(text: str, name: str) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """`lang=holds|holds || fails|fails` rows -> lang -> (sentences when the fact holds, when it fails)."""
    out = {}
    for lineno, line in enumerate(text.strip().splitlines(), 1):
        lang, sep, rest = line.partition("=")
        holds, bar, fails = rest.partition("||")
        parts = tuple(tuple(x.strip() for x in side.split("|") if x.strip()) for side in (holds, fails))
        if not sep or not bar or lang not in LANGUAGES or lang in out or not all(parts):
            raise ValueError(f"fact phrasings {name!r} line {lineno}: bad row {line!r}")
        out[lang] = parts
    if set(out) != set(LANGUAGES):
        raise ValueError(f"fact phrasings {name!r}: languages {sorted(out)}, expected {sorted(LANGUAGES)}")
    return out


def _facts(tables: dict[str, str], name: str) -> dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]:
    if set(tables) != set(FACTS):
        raise ValueError(f"fact phrasings {name!r} cover {sorted(tables)}, the lexicon has {sorted(FACTS)}")
    return {fact: _states(text, f"{name}/{fact}") for fact, text in tables.items()}


TRAIN = _facts({
    "refund": """
en=I would like my money back.|Please pay back what I was charged.|Return the full amount to me, please. || I don't want my money back.|No reimbursement needed, I just want it fixed.|There is no need to return what I paid.
de=Ich hätte gern mein Geld zurück.|Bitte erstatten Sie mir den vollen Betrag.|Überweisen Sie mir das Geld bitte zurück. || Mein Geld will ich nicht zurück.|Eine Erstattung brauche ich nicht, nur eine Lösung.|Sie müssen mir nichts zurücküberweisen.
fr=Je voudrais récupérer mon argent.|Merci de me rendre la somme versée.|Remboursez-moi le montant complet, s'il vous plaît. || Je ne veux pas récupérer mon argent.|Pas besoin de me rembourser, je veux juste une solution.|Inutile de me rendre la somme versée.
es=Quiero que me devuelvan el dinero.|Devuélvanme lo que me cobraron, por favor.|Reintégrenme el importe completo. || No quiero que me devuelvan el dinero.|No hace falta reintegrar nada, solo quiero una solución.|No necesito recuperar lo que pagué.
ru=Верните мне, пожалуйста, мои деньги.|Прошу вернуть всю сумму. || Деньги мне возвращать не нужно.|Возврат суммы мне не нужен, нужна только помощь.
zh=请把钱退给我。|我希望拿回全部的钱。 || 钱不用退给我。|我不需要拿回钱，只想解决问题。
ja=お金を返してほしいです。|支払った全額を戻してください。 || お金を返してもらう必要はありません。|払い戻しはいらないので、直してほしいだけです。
hi=मुझे मेरे पैसे वापस चाहिए।|कृपया पूरी रकम लौटा दीजिए। || मुझे पैसे वापस नहीं चाहिए।|रकम लौटाने की ज़रूरत नहीं, बस समस्या सुलझा दीजिए।
""",
    "screenshot": """
en=You'll find a picture of the error screen attached.|I've included a capture of what my screen shows.|See the attached image of the message I get. || I couldn't attach any picture of the screen.|There is no image attached to this message.|I forgot to include a capture of the screen.
de=Ein Bild der Fehlermeldung hängt an.|Ich habe ein Foto meiner Anzeige beigefügt.|Im Anhang sehen Sie, was auf meinem Gerät steht. || Ein Bild konnte ich leider nicht anhängen.|Dieser Nachricht liegt kein Bild bei.|Ein Foto der Anzeige habe ich vergessen beizufügen.
fr=Vous trouverez en pièce jointe une image du message d'erreur.|J'ai joint une photo de ce qui s'affiche.|L'image jointe montre ce que je vois. || Je n'ai pas pu joindre d'image.|Aucune image n'accompagne ce message.|J'ai oublié de joindre une photo de ce qui s'affiche.
es=Les mando adjunta una imagen del mensaje de error.|Incluyo una foto de lo que aparece.|En el adjunto se ve lo que me sale. || No he podido adjuntar ninguna imagen.|Este mensaje no lleva ninguna imagen.|Se me olvidó incluir una foto de lo que aparece.
ru=Прикладываю снимок сообщения об ошибке.|Во вложении картинка того, что я вижу. || Снимок приложить не получилось.|К письму никакой картинки не приложено.
zh=我把错误画面的图片附在后面了。|附件里有我看到的画面。 || 我没能附上任何图片。|这封信里没有附图。
ja=エラー画面の画像を添えました。|表示内容の写真を付けています。 || 画像は付けられませんでした。|このメッセージに画像は付いていません。
hi=त्रुटि वाली तस्वीर साथ में भेज रहा हूँ।|जो दिख रहा है उसकी फ़ोटो जोड़ दी है। || मैं कोई तस्वीर नहीं जोड़ पाया।|इस संदेश के साथ कोई तस्वीर नहीं है।
""",
    "card_blocked": """
en=My card was frozen and gets declined everywhere.|The bank has locked my card.|My card stopped working after they froze it. || My card works fine, nobody froze it.|The card itself is active and usable.|Nothing is wrong with my card, it still goes through.
de=Meine Karte wurde eingefroren und wird überall abgelehnt.|Die Bank hat meine Karte gesperrt.|Seit die Karte blockiert ist, geht nichts mehr. || Meine Karte funktioniert, sie ist nicht blockiert.|Die Karte selbst ist aktiv und nutzbar.|Mit meiner Karte ist alles in Ordnung.
fr=Ma carte a été gelée et elle est refusée partout.|La banque a bloqué ma carte.|Ma carte ne marche plus depuis qu'elle a été gelée. || Ma carte fonctionne, personne ne l'a gelée.|La carte elle-même est active et utilisable.|Ma carte n'a aucun souci.
es=Me congelaron la tarjeta y la rechazan en todas partes.|El banco me ha bloqueado la tarjeta.|Desde que la congelaron, la tarjeta no funciona. || Mi tarjeta funciona bien, nadie la ha congelado.|La tarjeta en sí está activa.|Con mi tarjeta no pasa nada raro.
ru=Мою карту заморозили, её нигде не принимают.|Банк заблокировал мою карту. || Карта работает, её никто не замораживал.|С картой всё в порядке, она активна.
zh=我的卡被银行冻住了，哪里都刷不了。|银行把我的卡锁了。 || 我的卡能正常用，没有被锁。|卡本身是好的，可以用。
ja=カードが凍結されて、どこでも使えません。|銀行にカードを止められました。 || カードは普通に使えています。|カード自体は有効で、問題ありません。
hi=बैंक ने मेरा कार्ड रोक दिया है, कहीं नहीं चल रहा।|मेरा कार्ड बंद कर दिया गया है। || मेरा कार्ड ठीक चल रहा है, किसी ने रोका नहीं।|कार्ड चालू है और काम करता है।
""",
    "callback": """
en=Ring me when you can.|Give me a phone call about this, please.|I'd prefer to talk it through on the phone, so call me. || Don't ring me, I can't take calls.|Write to me instead of phoning.|I'd rather not be phoned about this.
de=Klingeln Sie einfach bei mir durch.|Rufen Sie mich bitte dazu an.|Ich bespreche das lieber telefonisch, melden Sie sich per Anruf. || Rufen Sie mich bitte nicht an, ich kann nicht telefonieren.|Schreiben Sie mir lieber, statt anzurufen.|Ein Anruf ist nicht gewünscht.
fr=Passez-moi un coup de fil.|Téléphonez-moi à ce sujet, s'il vous plaît.|Je préfère en parler de vive voix, appelez-moi. || Ne m'appelez pas, je ne peux pas répondre.|Écrivez-moi plutôt que de téléphoner.|Je préfère ne pas recevoir d'appel.
es=Llámenme cuando puedan.|Denme un telefonazo sobre esto, por favor.|Prefiero hablarlo de viva voz, así que llámenme. || No me llamen, no puedo atender llamadas.|Escríbanme en vez de llamar.|Prefiero no recibir ninguna llamada.
ru=Позвоните мне, когда сможете.|Наберите меня, пожалуйста. || Не звоните мне, я не могу говорить.|Лучше напишите, звонить не надо.
zh=方便的时候给我打个电话。|请打电话跟我说。 || 别给我打电话，我接不了。|请写信告诉我，不要打电话。
ja=都合のいいときにお電話ください。|電話で話したいので、かけてください。 || 電話はかけないでください。|電話ではなく文面でお願いします。
hi=जब हो सके मुझे फ़ोन कीजिए।|कृपया इस बारे में मुझसे फ़ोन पर बात करें। || मुझे फ़ोन मत कीजिए।|फ़ोन करने के बजाय लिखकर बताइए।
""",
    "happened_before": """
en=The same thing occurred last month too.|This is the third time I see this.|I had exactly this issue a while ago. || This is the first time I see this.|It never occurred until today.|I've not had this issue before.
de=Letzten Monat war es genauso.|Das sehe ich jetzt schon zum dritten Mal.|Genau das hatte ich vor einiger Zeit schon einmal. || Das sehe ich heute zum ersten Mal.|Bis heute ist das nie vorgekommen.|So etwas hatte ich bisher nicht.
fr=La même chose s'est produite le mois dernier.|C'est la troisième fois que je vois ça.|J'ai eu exactement ce souci il y a quelque temps. || C'est la première fois que je vois ça.|Ça n'était jamais arrivé avant aujourd'hui.|Je n'avais jamais eu ce souci.
es=El mes pasado ocurrió lo mismo.|Es la tercera vez que me pasa.|Tuve justo este problema hace un tiempo. || Es la primera vez que me pasa.|Hasta hoy no había ocurrido nunca.|Nunca había tenido este problema.
ru=В прошлом месяце было то же самое.|Это уже третий раз. || Такое у меня впервые.|До сегодняшнего дня такого не было.
zh=上个月也出现过一模一样的情况。|这已经是第三次了。 || 这是我第一次遇到。|今天之前从来没有过。
ja=先月もまったく同じことがありました。|これで三回目です。 || こんなことは初めてです。|今日まで一度もありませんでした。
hi=पिछले महीने भी बिल्कुल यही हुआ था।|यह तीसरी बार हो रहा है। || ऐसा मेरे साथ पहली बार हुआ है।|आज से पहले ऐसा कभी नहीं हुआ।
""",
    "cancel": """
en=Please stop the order, I no longer need it.|Drop my purchase entirely, please.|I'd like the order withdrawn. || Keep my order as it is.|I still want the order to go through.|Don't stop my purchase.
de=Bitte stoppen Sie die Bestellung, ich brauche sie nicht mehr.|Machen Sie meinen Kauf bitte rückgängig.|Ich ziehe meine Bestellung zurück. || Lassen Sie meine Bestellung, wie sie ist.|Die Bestellung soll trotzdem durchgehen.|Meinen Kauf bitte nicht stoppen.
fr=Arrêtez la commande, je n'en ai plus besoin.|Merci d'annuler mon achat entièrement.|Je retire ma commande. || Gardez ma commande telle quelle.|Je veux toujours que la commande soit traitée.|N'arrêtez pas mon achat.
es=Paren el pedido, ya no lo necesito.|Anulen mi compra por completo, por favor.|Retiro mi pedido. || Dejen mi pedido como está.|Sigo queriendo que el pedido se tramite.|No paren mi compra.
ru=Остановите заказ, он мне больше не нужен.|Прошу аннулировать мою покупку. || Оставьте заказ как есть.|Я по-прежнему хочу получить заказ.
zh=请把订单停掉，我不需要了。|我要撤回这笔购买。 || 订单保持不变就好。|我还是要这个订单。
ja=もう不要なので注文を止めてください。|購入を取り消したいです。 || 注文はそのままにしてください。|注文はこのまま進めてほしいです。
hi=कृपया ऑर्डर रोक दीजिए, अब इसकी ज़रूरत नहीं।|मेरा ऑर्डर पूरी तरह रद्द कर दीजिए। || मेरा ऑर्डर जैसा है वैसा रहने दीजिए।|मुझे ऑर्डर अब भी चाहिए।
""",
    "premium": """
en=I pay for your top membership tier.|I'm on your highest membership level.|As a gold-level member I expected better. || I'm only on the free tier.|I have the basic membership, not the top one.|I never upgraded my membership.
de=Ich zahle für Ihre höchste Mitgliedsstufe.|Ich habe die Gold-Mitgliedschaft.|Als Mitglied der obersten Stufe hatte ich mehr erwartet. || Ich nutze nur die kostenlose Stufe.|Ich habe die einfache Mitgliedschaft, nicht die beste.|Meine Mitgliedschaft habe ich nie aufgestuft.
fr=Je cotise au niveau d'adhésion le plus haut.|J'ai l'adhésion or.|En tant que membre du niveau supérieur, j'attendais mieux. || Je n'ai que l'offre gratuite.|J'ai l'adhésion de base, pas la meilleure.|Je n'ai jamais pris le niveau supérieur.
es=Soy socio del nivel más alto que ofrecen.|Tengo la membresía oro.|Como socio del nivel superior esperaba más. || Solo uso el nivel gratuito.|Tengo la membresía básica, no la mejor.|Nunca subí de nivel mi membresía.
ru=Я плачу за самый высокий уровень членства.|У меня золотой статус. || У меня только бесплатный уровень.|У меня базовое членство, не высшее.
zh=我付费开通了最高等级的会员。|我是金卡会员。 || 我只用免费版。|我是普通会员，不是最高级的。
ja=最上位の会員ランクに入っています。|ゴールド会員です。 || 無料のランクしか使っていません。|一般会員で、上位ランクではありません。
hi=मैं सबसे ऊँचे स्तर की मेंबरशिप के पैसे देता हूँ।|मेरे पास गोल्ड मेंबरशिप है। || मैं सिर्फ़ मुफ़्त वाला स्तर इस्तेमाल करता हूँ।|मेरी मेंबरशिप साधारण है, सबसे ऊँची नहीं।
""",
    "restart": """
en=I switched it off and on again already.|Rebooting did nothing.|I turned it off and back on twice. || I haven't switched it off and on yet.|I didn't reboot it.|Turning it off and on is something I still have to try.
de=Aus- und wieder eingeschaltet habe ich es schon.|Das Neuhochfahren hat nichts gebracht.|Ich habe es zweimal aus- und angeschaltet. || Aus- und eingeschaltet habe ich es noch nicht.|Neu hochgefahren habe ich es nicht.|Das Aus- und Einschalten muss ich noch ausprobieren.
fr=Je l'ai déjà éteint et rallumé.|Le redémarrage n'a rien changé.|Je l'ai éteint puis rallumé deux fois. || Je ne l'ai pas encore éteint et rallumé.|Je n'ai fait aucun redémarrage.|Il faut encore que j'essaie de l'éteindre et de le rallumer.
es=Ya lo apagué y lo volví a encender.|Reiniciarlo no sirvió de nada.|Lo apagué y encendí dos veces. || Todavía no lo he apagado y encendido.|No he hecho ningún reinicio.|Aún tengo que probar a apagarlo y encenderlo.
ru=Я уже выключал и включал его.|Перезапуск ничего не дал. || Я его ещё не выключал и не включал.|Перезапуск я не делал.
zh=我已经关机再开机了。|重新启动也没用。 || 我还没关机重开过。|我没有重新启动。
ja=電源を切って入れ直しました。|再起動しても変わりませんでした。 || まだ電源を入れ直していません。|再起動という手はまだ使っていません。
hi=मैंने इसे बंद करके फिर चालू कर दिया है।|दोबारा चालू करने से कुछ नहीं हुआ। || मैंने अभी इसे बंद करके चालू नहीं किया।|रीबूट वाला तरीका मैंने अभी आज़माया नहीं।
""",
}, "train")

VALIDATION = _facts({
    "refund": """
en=Could you reimburse me for this?|I expect the charge to come back to me. || I'm not looking to be reimbursed.|Giving the money back is not what I'm asking.
de=Können Sie mir das zurückzahlen?|Ich erwarte, dass der Betrag zurückkommt. || Ich möchte nichts zurückgezahlt bekommen.|Um eine Rückzahlung geht es mir nicht.
fr=Pouvez-vous me rendre cet argent ?|J'attends que le montant me revienne. || Je ne cherche pas à être remboursé.|Rendre l'argent n'est pas ce que je demande.
es=¿Pueden reembolsarme esto?|Espero recuperar el importe. || No busco que me reembolsen nada.|Recuperar el importe no es lo que pido.
ru=Можете вернуть мне эти деньги?|Жду, что сумму мне вернут. || Возвращать деньги не требуется.|Я не прошу вернуть сумму.
zh=能把这笔钱还给我吗？|我等着把钱退回来。 || 我不打算要回这笔钱。|我并不是要你们退钱。
ja=この代金を返してもらえますか？|代金が戻ってくるのを待っています。 || 代金を戻してもらうつもりはありません。|お金を返してという話ではありません。
hi=क्या आप यह पैसा लौटा सकते हैं?|मुझे उम्मीद है कि रकम वापस मिलेगी। || मैं पैसे लौटवाना नहीं चाहता।|मेरी माँग पैसे वापस पाने की नहीं है।
""",
    "screenshot": """
en=A screen capture is attached below.|I added an image showing the error. || No screen capture came with this message.|I have no image of the error to send.
de=Unten hängt eine Bildschirmaufnahme.|Ich habe ein Bild mit der Meldung angehängt. || Eine Bildschirmaufnahme ist nicht dabei.|Ein Bild der Meldung habe ich nicht.
fr=Une capture est jointe ci-dessous.|J'ai ajouté une image qui montre le message. || Aucune capture n'est jointe.|Je n'ai pas d'image du message à envoyer.
es=Abajo va adjunta una captura del mensaje de error.|Añadí una imagen que muestra el aviso. || No va adjunta ninguna captura.|No tengo imagen del aviso para mandar.
ru=Ниже прикреплён снимок экрана.|Я добавил картинку с сообщением. || Снимка экрана к письму нет.|Картинки с сообщением у меня нет.
zh=下面附了截图。|我加了一张显示提示的图片。 || 截图这次没附上。|我没有提示信息的图片可发。
ja=下に画面の画像を付けています。|メッセージが分かる画像を追加しました。 || 画面の画像は付いていません。|エラー表示の画像は手元にありません。
hi=नीचे स्क्रीन की तस्वीर लगी है।|मैंने संदेश दिखाने वाली तस्वीर जोड़ी है। || स्क्रीन की कोई तस्वीर साथ नहीं है।|मेरे पास संदेश की कोई तस्वीर नहीं है।
""",
    "card_blocked": """
en=The bank froze my card yesterday.|My card has been suspended by the bank. || My card is working normally.|The card is fine and has not been frozen.
de=Die Bank hat gestern meine Karte eingefroren.|Meine Karte wurde von der Bank stillgelegt. || Meine Karte geht ganz normal.|Die Karte ist in Ordnung und nicht eingefroren.
fr=La banque a gelé ma carte hier.|Ma carte a été suspendue par la banque. || Ma carte marche normalement.|La carte va bien, elle n'a pas été gelée.
es=El banco me congeló la tarjeta ayer.|La tarjeta me la suspendió el banco. || Mi tarjeta funciona con normalidad.|La tarjeta está bien, no la han congelado.
ru=Вчера банк заморозил мою карту.|Банк приостановил действие моей карты. || Карта работает как обычно.|Карту не замораживали, она в порядке.
zh=银行昨天冻结了我的卡。|我的卡被银行停用了。 || 我的卡用起来一切正常。|卡没问题，也没被冻结。
ja=昨日、銀行にカードを凍結されました。|カードが銀行に一時停止されました。 || カードは普段どおり使えます。|カードは大丈夫で、凍結もされていません。
hi=बैंक ने कल मेरा कार्ड जाम कर दिया।|बैंक ने मेरा कार्ड निलंबित कर दिया है। || मेरा कार्ड रोज़ की तरह चल रहा है।|कार्ड ठीक है, उसे रोका नहीं गया।
""",
    "callback": """
en=Please phone me about this.|A quick call from your side would be best. || Please don't phone me.|I'd rather not get a call, a written answer is enough.
de=Bitte telefonieren Sie mit mir deswegen.|Am besten wäre ein kurzer Anruf von Ihnen. || Bitte telefonieren Sie nicht mit mir.|Einen Anruf möchte ich nicht, eine schriftliche Antwort reicht.
fr=Merci de me téléphoner à ce propos.|Le mieux serait un petit appel de votre part. || Merci de ne pas me téléphoner.|Je préfère ne pas être appelé, une réponse écrite suffit.
es=Por favor, llámenme por este asunto.|Lo mejor sería una llamada breve de su parte. || Por favor, no me telefoneen.|Prefiero que no me llamen, basta con una respuesta escrita.
ru=Пожалуйста, позвоните мне по этому вопросу.|Лучше всего будет короткий звонок от вас. || Пожалуйста, не звоните мне.|Звонок не нужен, достаточно письменного ответа.
zh=请就这件事给我打电话。|最好你们能打个电话过来。 || 请不要打电话给我。|不用打电话，书面回复就够了。
ja=この件でお電話をお願いします。|そちらから一度電話をもらえると助かります。 || お電話はご遠慮ください。|電話は不要で、書面の回答で十分です。
hi=कृपया इस बारे में मुझे फ़ोन करें।|आपकी तरफ़ से एक छोटी सी कॉल सबसे अच्छी रहेगी। || कृपया मुझे फ़ोन न करें।|कॉल की ज़रूरत नहीं, लिखित जवाब काफ़ी है।
""",
    "happened_before": """
en=It already happened to me once before.|This keeps coming back every few weeks. || This is new, it never occurred before.|It's the first time this has happened.
de=Das ist mir schon einmal passiert.|Das kommt alle paar Wochen wieder. || Das ist neu, das gab es vorher nie.|Es ist das erste Mal, dass das passiert.
fr=Ça m'est déjà arrivé une fois.|Ça revient toutes les quelques semaines. || C'est nouveau, ça n'était jamais arrivé.|C'est la première fois que ça se produit.
es=Ya me pasó una vez.|Esto vuelve cada pocas semanas. || Es nuevo, nunca había ocurrido.|Es la primera vez que ocurre.
ru=Со мной такое уже было однажды.|Это повторяется каждые несколько недель. || Это что-то новое, раньше такого не было.|Это случилось в первый раз.
zh=我以前就碰到过一次。|每隔几周就会再来一次。 || 这是新情况，以前从未出现。|这是第一次发生。
ja=前にも一度同じ目に遭いました。|数週間ごとに繰り返し起きます。 || これは新しい問題で、以前はありませんでした。|起きたのは今回が初めてです。
hi=मेरे साथ यह पहले एक बार हो चुका है।|यह हर कुछ हफ़्तों में फिर से होता है। || यह नया है, पहले कभी नहीं हुआ था।|ऐसा पहली बार हुआ है।
""",
    "cancel": """
en=I'd like to withdraw my order.|Please cancel what I ordered. || I want to keep my order.|Please go ahead with my order as planned.
de=Ich möchte meine Bestellung widerrufen.|Bitte stornieren Sie, was ich bestellt habe. || Ich möchte meine Bestellung behalten.|Bitte führen Sie meine Bestellung wie geplant aus.
fr=Je souhaite retirer ma commande.|Merci d'annuler ce que j'ai commandé. || Je veux garder ma commande.|Merci de traiter ma commande comme prévu.
es=Quiero retirar mi pedido.|Cancelen lo que pedí, por favor. || Quiero mantener mi pedido.|Sigan con mi pedido como estaba previsto.
ru=Хочу отозвать свой заказ.|Пожалуйста, отмените то, что я заказал. || Я хочу сохранить заказ.|Пожалуйста, выполните заказ, как планировалось.
zh=我想撤销我的订单。|请取消我订的东西。 || 我想保留订单。|请按原计划处理我的订单。
ja=注文を取り下げたいです。|注文した品をキャンセルしてください。 || 注文はキャンセルせずに残したいです。|予定どおり注文を進めてください。
hi=मैं अपना ऑर्डर वापस लेना चाहता हूँ।|कृपया मेरा मँगाया सामान रद्द कर दें। || मैं अपना ऑर्डर बनाए रखना चाहता हूँ।|कृपया मेरा ऑर्डर योजना के अनुसार आगे बढ़ाएँ।
""",
    "premium": """
en=I'm a member on your premium level.|I have the top-tier membership. || I only have the free membership.|I'm on the entry-level tier.
de=Ich bin Mitglied auf Ihrer Premium-Stufe.|Ich habe die Mitgliedschaft der höchsten Stufe. || Ich habe nur die Gratis-Mitgliedschaft.|Ich bin in der Einstiegsstufe.
fr=Je suis membre au niveau premium.|J'ai l'adhésion du niveau le plus haut. || Je n'ai que l'adhésion gratuite.|Je suis au niveau d'entrée.
es=Soy socio del nivel premium.|Tengo la membresía de nivel superior. || Solo tengo la membresía gratuita.|Estoy en el nivel inicial.
ru=Я участник премиального уровня.|У меня членство высшего уровня. || У меня только бесплатное членство.|Я на начальном уровне.
zh=我是你们的高级别会员。|我开的是顶级会员。 || 我只有免费会员资格。|我在入门级别。
ja=プレミアム会員として登録しています。|最上位の会員資格を持っています。 || 無料会員の資格しかありません。|入門ランクの会員です。
hi=मैं आपके प्रीमियम स्तर का सदस्य हूँ।|मेरे पास सबसे ऊँचे दर्जे की मेंबरशिप है। || मेरे पास केवल मुफ़्त मेंबरशिप है।|मैं शुरुआती स्तर पर हूँ।
""",
    "restart": """
en=Switching it off and on didn't help.|I've rebooted it a few times already. || I have not rebooted it so far.|Restarting is something I haven't tried.
de=Aus- und Einschalten hat nicht geholfen.|Ich habe es schon ein paarmal neu gestartet. || Bisher habe ich es nicht neu gestartet.|Einen Neustart habe ich nicht probiert.
fr=L'éteindre et le rallumer n'a pas aidé.|Je l'ai déjà relancé plusieurs fois. || Je ne l'ai pas relancé pour l'instant.|Je n'ai pas essayé de redémarrer.
es=Apagarlo y encenderlo no ayudó.|Ya lo he reiniciado varias veces. || Hasta ahora no lo he reiniciado.|No he probado a reiniciarlo.
ru=Выключение и включение не помогло.|Я уже несколько раз его перезапускал. || Пока я его не перезапускал.|Перезапуск я не пробовал.
zh=关机再开机也没用。|我已经重启好几次了。 || 到现在我还没重启过。|重启这一步我还没做。
ja=電源の入れ直しでは直りませんでした。|もう何度か再起動しています。 || 今のところ再起動はしていません。|再起動はこれまで一度も試していません。
hi=बंद करके चालू करने से मदद नहीं मिली।|मैं इसे कई बार दोबारा शुरू कर चुका हूँ। || अब तक मैंने इसे दोबारा शुरू नहीं किया।|मैंने रीस्टार्ट करके नहीं देखा।
""",
}, "validation")

# Urgency said without a scale term, in the validation wording (topic_frames.URGENCY_PHRASES is the
# training one): `phrasings` states every urgency with one of these.
PROBE_URGENCY = {
    "low": _table("""
en=This isn't time-sensitive.|Whenever you get around to it is fine.|Handle it when it suits you.
de=Das ist nicht zeitkritisch.|Wann immer Sie dazu kommen, passt es.|Erledigen Sie das, wenn es Ihnen passt.
fr=Ce n'est pas pressé.|Quand vous aurez un moment, ça ira.|Traitez-le quand cela vous arrange.
es=No corre prisa.|Cuando puedan, está bien.|Atiéndanlo cuando les venga bien.
ru=Это не горит.|Когда доберётесь, тогда и хорошо.|Займитесь этим, когда будет удобно.
zh=这事不赶时间。|你们什么时候有空处理都行。|方便的时候再弄就好。
ja=時間に追われる話ではありません。|手が空いたときで構いません。|ご都合のよいときに対応してください。
hi=इसमें समय की कोई बंदिश नहीं है।|जब आपको फ़ुर्सत मिले, तब देख लीजिए।|जब सुविधा हो तब कर दीजिए।
""", "probe/urgency-low"),
    "high": _table("""
en=We need this solved within the hour.|Please drop everything and look at this.|Every minute this stays broken costs us.
de=Das muss innerhalb einer Stunde gelöst sein.|Bitte lassen Sie alles liegen und sehen Sie sich das an.|Jede Minute Stillstand kostet uns Geld.
fr=Il faut que ce soit réglé dans l'heure.|Laissez tout tomber et regardez ça, s'il vous plaît.|Chaque minute de panne nous coûte cher.
es=Necesitamos que esto se resuelva en menos de una hora.|Dejen todo y miren esto, por favor.|Cada minuto que sigue roto nos cuesta dinero.
ru=Это нужно решить в течение часа.|Бросьте всё и посмотрите, пожалуйста.|Каждая минута простоя стоит нам денег.
zh=这个必须在一小时内解决。|请放下手头的事先看这个。|多拖一分钟我们就多损失一分钟。
ja=一時間以内に解決してもらう必要があります。|ほかの作業を止めて、これを見てください。|止まっている一分ごとに損失が出ています。
hi=इसे एक घंटे के भीतर सुलझाना ज़रूरी है।|कृपया सब छोड़कर इसे देखिए।|हर मिनट की रुकावट हमें नुकसान पहुँचा रही है।
""", "probe/urgency-high"),
}


def with_fact_phrasings(group: TemplateGroup, table=TRAIN, share: float | None = None) -> TemplateGroup:
    """`group` whose fact slots may also be stated by `table` (train_standin.py --fact-phrasings)."""
    return dataclasses.replace(group, fact_phrasings=table,
                               **({} if share is None else {"fact_phrasing_share": share}))
