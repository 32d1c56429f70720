"""More ways to state a topic, an urgency or a mood in training states (train_standin.py --varied-topics), to
frame a noul question (--varied-noul-frames), and to say how urgent a ticket is without a scale term
(--urgency-phrases).

The training templates state each of these in three fixed sentences per language ("I have a problem
related to {kw}.", "Priority: {t}."). A model trained on them alone learns the frame as much as the cue:
run 8 of the stand-in answered `billing` to hand-written tickets whose cue word sat in a sentence of
their own (the `freeform` suite, checkpoints/laya-tiny/TRAINING.md). These frames put the cue in other
positions and among other words, so the cue has to carry the answer.

Training only: `varied_group` widens the `train` template group's slot tables with them, and no suite
draws from it. tests/suites/test_topic_frames.py checks that no frame repeats a held-out or validation
template and that no frame holds a cue or scale term of its own (it would change the answer).
"""
from __future__ import annotations

import dataclasses

from laya_opt.suites.synthetic.templates import TemplateGroup, _table

FRAMES = {
    "department": _table("""
en=I am writing because of the {kw}.|The {kw} has been a headache since Monday.|Can someone look into the {kw} for me?|We ran into trouble with {kw} again this week.|{kw} is why I am getting in touch.|Still no progress on the {kw} side.|Quick question about {kw}.|Something is off with the {kw}.|My colleague told me to contact you about {kw}.|Nobody has answered me about the {kw} yet.|It's the {kw} thing again, same as last month.|Please help me sort out the {kw}.|This is about {kw}, nothing else.|Last week the {kw} went wrong and it still is.
de=Ich melde mich wegen {kw}.|Seit Montag gibt es Ärger mit {kw}.|Kann sich jemand um {kw} kümmern?|Beim Thema {kw} geht es nicht voran.|Kurze Frage zu {kw}.|Mit {kw} stimmt etwas nicht.|Ein Kollege meinte, ich soll mich wegen {kw} bei Ihnen melden.|Zu {kw} hat mir noch niemand geantwortet.|Es geht schon wieder um {kw}.|Bitte helfen Sie mir bei {kw}.|{kw} – deshalb schreibe ich.|Letzte Woche ging bei {kw} etwas schief.
fr=Je vous contacte à cause de {kw}.|Depuis lundi, {kw} nous pose souci.|Quelqu'un peut-il regarder {kw} ?|Aucun progrès côté {kw}.|Petite question sur {kw}.|Quelque chose ne va pas avec {kw}.|Un collègue m'a dit de vous écrire pour {kw}.|Personne ne m'a répondu concernant {kw}.|Encore une fois, c'est {kw}.|Merci de m'aider avec {kw}.|{kw} : voilà pourquoi je vous écris.|La semaine dernière, {kw} a mal tourné.
es=Les escribo por {kw}.|Desde el lunes tenemos líos con {kw}.|¿Alguien puede revisar lo de {kw}?|No hay avances con {kw}.|Una pregunta rápida sobre {kw}.|Algo no va bien con {kw}.|Un compañero me dijo que les escribiera por {kw}.|Nadie me ha contestado sobre {kw}.|Otra vez es lo de {kw}.|Ayúdenme con {kw}, por favor.|{kw}: por eso les escribo.|La semana pasada algo falló con {kw}.
ru=Пишу насчёт: {kw}.|Снова неприятности, тема — {kw}.|Кто-нибудь может разобраться: {kw}?|Коллега посоветовал написать вам, тема — {kw}.|Всё дело вот в чём: {kw}.|Ответа так и нет, вопрос — {kw}.
zh=我写信是因为{kw}的事。|{kw}这边一直没有进展。|能不能帮我看看{kw}？|又是{kw}的事情。|同事让我就{kw}联系你们。|关于{kw}，想简单问一下。
ja={kw}の件で連絡しました。|{kw}がまたうまくいきません。|{kw}について誰か確認してもらえますか？|同僚に{kw}のことはこちらに聞くよう言われました。|{kw}の件、まだ返事がありません。|また{kw}の話です。
hi=मैं {kw} की वजह से लिख रहा हूँ।|{kw} को लेकर फिर परेशानी है।|क्या कोई {kw} देख सकता है?|{kw} पर अभी तक कोई जवाब नहीं मिला।|सहकर्मी ने कहा कि {kw} के लिए आपसे संपर्क करूँ।|फिर से {kw} का मामला है।
""", "varied/department"),
    "product": _table("""
en=My {kw} stopped working yesterday.|The {kw} I bought last month keeps turning off.|Since the update my {kw} behaves strangely.|I use the {kw} every day for work.|The new {kw} makes a strange noise.|I got this {kw} as a gift and it will not turn on.|Something is wrong with my {kw}.|Can you help with the {kw}?
de=Mein Gerät ({kw}) geht seit gestern nicht mehr.|Seit dem Update spinnt {kw}.|Ich nutze {kw} jeden Tag bei der Arbeit.|Das neue Gerät, {kw}, macht ein seltsames Geräusch.|Ich habe {kw} geschenkt bekommen und es geht nicht an.
fr=Mon appareil ({kw}) ne marche plus depuis hier.|Depuis la mise à jour, {kw} fait n'importe quoi.|J'utilise {kw} tous les jours au travail.|Le nouvel appareil, {kw}, fait un bruit bizarre.|On m'a offert {kw} et il ne s'allume pas.
es=Mi aparato ({kw}) dejó de funcionar ayer.|Desde la actualización, {kw} va fatal.|Uso {kw} a diario para trabajar.|El aparato nuevo, {kw}, hace un ruido raro.|Me regalaron {kw} y no enciende.
ru=Мой {kw} вчера перестал работать.|После обновления {kw} ведёт себя странно.|Каждый день работаю с ним: {kw}.
zh=我的{kw}昨天突然不动了。|更新以后{kw}就不太正常。|我每天上班都要用{kw}。
ja=昨日から{kw}が動きません。|アップデート後、{kw}の調子が変です。|{kw}を毎日仕事で使っています。
hi=मेरा {kw} कल से काम नहीं कर रहा।|अपडेट के बाद {kw} ठीक से नहीं चल रहा।|मैं रोज़ काम के लिए {kw} इस्तेमाल करता हूँ।
""", "varied/product"),
    "urgency": _table("""
en=It is a {t} issue.|For us this is {t}.|I'd say the matter is {t}.|This feels {t} right now.|The situation is {t} at the moment.|We consider it {t}.
de=Für uns ist das {t}.|Die Lage ist gerade {t}.|Ich finde das {t}.|Aus meiner Sicht: {t}.
fr=Pour nous, c'est {t}.|La situation est {t} en ce moment.|Selon moi, c'est {t}.|Disons que c'est {t}.
es=Para nosotros es {t}.|La situación ahora mismo es {t}.|En mi opinión, es {t}.|Digamos que es {t}.
ru=Для нас это {t}.|Ситуация сейчас: {t}.|По-моему, это {t}.
zh=对我们来说这是{t}的。|目前情况{t}。|在我看来，这{t}。
ja=状況は{t}です。|私の感覚では{t}です。|正直に言うと{t}な件です。
hi=हमारे लिए यह {t} है।|अभी हालत {t} है।|मेरी राय में यह {t} है।
""", "varied/urgency"),
    "mood": _table("""
en=I am really {t} right now.|To be frank, we are {t}.|Everyone here is {t} with how it went.|I have to say I'm {t}.|After all this I feel {t}.
de=Ich bin wirklich {t}.|Ehrlich, wir sind {t}.|Nach all dem bin ich {t}.|Alle hier sind {t}.
fr=Je suis vraiment {t}.|Franchement, nous sommes {t}.|Après tout ça, je suis {t}.|Tout le monde ici est {t}.
es=Estoy realmente {t}.|Francamente, estamos {t}.|Después de todo esto estoy {t}.|Aquí todos están {t}.
ru=Я правда {t}.|Скажу прямо: я {t}.|После всего этого я {t}.
zh=我真的{t}。|说句实话，大家都{t}。|经历了这些，我{t}。
ja=気持ちとしては{t}です。|率直に言って{t}です。|いろいろあって、今は{t}です。
hi=मैं सच में {t} हूँ।|सीधी बात, हम {t} हैं।|इन सबके बाद मैं {t} हूँ।
""", "varied/mood"),
}


# Frames around a noul statement {s}. The training templates ask in two ("{s}", "True or false: {s}"), and a
# model trained on them alone reads the frame as part of the fact: run 9 answered `validation`'s standard noul
# questions right 80% of the time in their own frames and 99% with the same statements put in a training frame
# (checkpoints/laya-tiny/TRAINING.md). Affirmative only: a frame that negated would flip the label.
NOUL_FRAMES = _table("""
en=Please confirm: {s}|Does this apply? {s}|Statement to verify: {s}|According to the ticket, is this so? {s}|Can we say this? {s}|Tell me if this is accurate: {s}|Question: {s}|{s} Correct?
de=Bitte bestätigen: {s}|Gilt das? {s}|Zu prüfende Aussage: {s}|Laut Ticket – ist das so? {s}|Kann man das sagen? {s}|Sag mir, ob das stimmt: {s}|Frage: {s}|{s} Richtig?
fr=Merci de confirmer : {s}|Est-ce que cela s'applique ? {s}|Affirmation à vérifier : {s}|D'après le ticket, est-ce le cas ? {s}|Peut-on dire cela ? {s}|Dis-moi si c'est exact : {s}|Question : {s}|{s} Correct ?
es=Confirma, por favor: {s}|¿Esto aplica? {s}|Afirmación a verificar: {s}|Según el ticket, ¿es así? {s}|¿Se puede decir esto? {s}|Dime si es exacto: {s}|Pregunta: {s}|{s} ¿Correcto?
ru=Подтверди, пожалуйста: {s}|Это применимо? {s}|Утверждение для проверки: {s}|По обращению это так? {s}|Можно ли так сказать? {s}|Скажи, точно ли это: {s}|Вопрос: {s}|{s} Верно?
zh=请确认：{s}|这条适用吗？{s}|待核实的陈述：{s}|根据工单，是这样吗？{s}|可以这么说吗？{s}|告诉我这是否准确：{s}|问题：{s}|{s}对吗？
ja=確認してください：{s}|これは当てはまりますか？{s}|検証する記述：{s}|チケットによると、そうですか？{s}|そう言えますか？{s}|正確かどうか教えてください：{s}|質問：{s}|{s}その通りですか？
hi=कृपया पुष्टि करें: {s}|क्या यह लागू होता है? {s}|जाँचने वाला कथन: {s}|टिकट के हिसाब से, क्या ऐसा है? {s}|क्या ऐसा कहा जा सकता है? {s}|बताइए कि क्या यह सटीक है: {s}|सवाल: {s}|{s} क्या सच है?
""", "varied/noul")


def with_noul_frames(group: TemplateGroup) -> TemplateGroup:
    """`group` with its noul frames followed by NOUL_FRAMES (train_standin.py --varied-noul-frames)."""
    return dataclasses.replace(group, noul_frames={lang: frames + NOUL_FRAMES[lang]
                                                   for lang, frames in group.noul_frames.items()})


def varied_group(group: TemplateGroup) -> TemplateGroup:
    """`group` with each slot table's frames followed by the frames above (other tables unchanged)."""
    slots = {kind: {lang: frames + FRAMES[kind][lang] for lang, frames in table.items()} if kind in FRAMES
             else table for kind, table in group.slots.items()}
    return dataclasses.replace(group, slots=slots)


# Urgency said without a scale term, in two bands (train_standin.py --urgency-phrases). The scale terms
# alone teach nothing about "no hurry" or "not urgent": run 9 read the hand-written tickets' negated
# urgency as `serious` or `critical` (checkpoints/laya-tiny/TRAINING.md). A low phrase answers the lowest
# level a question offers and a high one the highest; the generator offers one level of the band
# (URGENCY_BANDS) with the others outside it, so the answer is never in doubt. A low phrase may name a
# high term only negated; none repeats a sentence of a shipped suite (tests/suites/test_topic_frames.py).
URGENCY_BANDS = {"low": (0, 1), "high": (5, 6)}
URGENCY_PHRASES = {
    "low": _table("""
en=There is no hurry on this.|This can wait until next week.|It is not urgent at all, take your time.|Low priority, no pressure.|Nothing pressing here.|No need to hurry with this one.
de=Es eilt nicht.|Das hat Zeit bis nächste Woche.|Kein Grund zur Eile.|Das ist wirklich nicht dringend, lassen Sie sich Zeit.|Niedrige Priorität, kein Druck.
fr=Inutile de se dépêcher.|Ça peut attendre la semaine prochaine.|Aucune urgence, prenez votre temps.|Ce n'est vraiment pas urgent.|Priorité basse, pas de pression.
es=No hay prisa.|Esto puede esperar hasta la semana que viene.|Sin prisas, tómense su tiempo.|De verdad que no es urgente.|Prioridad baja, sin presión.
ru=Спешки нет.|Это может подождать до следующей недели.|Совсем не срочно, не торопитесь.|Низкий приоритет, без давления.
zh=不着急。|这件事可以等到下周。|一点也不急，慢慢来。|优先级很低，没有压力。
ja=急ぎではありません。|来週まで待てます。|まったく急いでいないので、ゆっくりで大丈夫です。|優先度は低いです。
hi=कोई जल्दी नहीं है।|यह अगले हफ़्ते तक रुक सकता है।|आराम से देखिए, कोई दबाव नहीं।|इसकी प्राथमिकता कम है।
""", "phrases/urgency-low"),
    "high": _table("""
en=This needs to be fixed immediately.|Everything has stopped on our side, we need help right now.|Please treat this as top priority.|We cannot wait another minute.
de=Das muss sofort erledigt werden.|Bei uns steht alles still, wir brauchen jetzt Hilfe.|Bitte behandeln Sie das mit höchster Priorität.|Wir können keine Minute länger warten.
fr=Il faut régler ça immédiatement.|Tout est bloqué chez nous, il nous faut de l'aide tout de suite.|Merci de traiter ceci en priorité absolue.|Nous ne pouvons plus attendre une minute.
es=Hay que resolverlo de inmediato.|Todo está parado, necesitamos ayuda ya.|Por favor, denle máxima prioridad.|No podemos esperar ni un minuto más.
ru=Это нужно решить немедленно.|У нас всё стоит, помощь нужна прямо сейчас.|Пожалуйста, это наивысший приоритет.
zh=必须马上解决。|我们这边全部停摆了，现在就需要帮助。|请按最高优先级处理。
ja=今すぐ対応が必要です。|業務が完全に止まっていて、すぐに助けが必要です。|最優先で対応してください。
hi=इसे अभी तुरंत ठीक करना होगा।|हमारा सारा काम रुका हुआ है, अभी मदद चाहिए।|कृपया इसे सबसे ऊपर की प्राथमिकता दें।
""", "phrases/urgency-high"),
}


def with_urgency_phrases(group: TemplateGroup) -> TemplateGroup:
    """`group` whose urgency slots may also be stated by URGENCY_PHRASES (train_standin.py --urgency-phrases)."""
    return dataclasses.replace(group, urgency_phrases=URGENCY_PHRASES)
