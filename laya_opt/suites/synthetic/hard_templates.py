"""Wording of the hard cases (`laya_opt.suites.synthetic.hard_cases`): one `HardWording` per template group.

Three wordings, disjoint from each other and from the standard templates (`laya_opt.suites.synthetic.templates`):
`train` for training streams that include hard cases, `validation` for the validation suite, and
`heldout` for the `heldout_hard` suite. `heldout_hard` states use the held-out group's sentences. Its
instructions (`HELDOUT_HARD`) are new wording, and its noul statements are new paraphrases
(`laya_opt.suites.synthetic.paraphrases`), so no instruction is a training string, even with the frame removed.

Slots: `{kw}` cue term, `{main}`/`{side}` two cue terms, `{t}` scale term, `{n}`/`{m}` rating,
`{words}` an option's cue words, `{s}` a lexicon fact sentence. In `fact_keep`, `{s}` loses its final
punctuation, so that the negation word and the fact share one clause.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from laya_opt.suites.synthetic.templates import TEMPLATE_GROUPS, TemplateGroup, _table


@dataclass(frozen=True)
class HardWording:
    name: str
    option_description: dict[str, tuple[str, ...]]  # a choice option described by its cue words: {words}
    not_about: dict[str, tuple[str, ...]]           # an offered option's cue the message is not about: {kw}
    settled: dict[str, tuple[str, ...]]             # an offered option's cue of a closed matter, no negation: {kw}
    main_side: dict[str, tuple[str, ...]]           # two offered cues, one the topic: {main}, {side}
    urgency_before: dict[str, tuple[str, ...]]      # an urgency term that no longer holds: {t}
    mood_before: dict[str, tuple[str, ...]]         # a mood that has passed: {t}
    rating_before: dict[str, tuple[str, ...]]       # an earlier rating: {n}, {m}
    fact_keep: dict[str, tuple[str, ...]]           # a negation word that leaves the fact {s} as stated
    fact_retract: dict[str, tuple[str, ...]]        # a fact sentence {s} taken back: it no longer holds

    def all_strings(self) -> list[str]:
        return [item for field in dataclasses.fields(self) if field.name != "name"
                for items in getattr(self, field.name).values() for item in items]


_TRAIN = HardWording("train", option_description=_table("""
en=things like {words}|questions about {words}|issues like {words}|requests concerning {words}
de=Dinge wie {words}|Fragen zu {words}|Anliegen in Sachen {words}|Anfragen bezüglich {words}
fr=des choses comme {words}|des questions sur {words}|des demandes concernant {words}|par exemple : {words}
es=cosas como {words}|preguntas sobre {words}|asuntos del tipo {words}|consultas relativas a {words}
ru=темы вроде: {words}|вопросы по темам: {words}|обращения на темы: {words}|темы наподобие: {words}
zh={words}等问题|像{words}这样的问题|关于{words}的事情|有关{words}的咨询
ja={words}など|{words}のような件|{words}に関するご相談|{words}などの問題
hi={words} जैसी बातें|{words} से जुड़े सवाल|{words} आदि के मामले|{words} के बारे में प्रश्न
""", "hard/train/option_description"),
    not_about=_table("""
en=This is not about {kw}.|My question isn't related to {kw}.|{kw} isn't the reason I'm writing.|I'm not contacting you about {kw}.
de=Es geht nicht um {kw}.|Mein Anliegen betrifft nicht {kw}.|Ich schreibe nicht wegen {kw}.|{kw} ist nicht der Grund meiner Nachricht.
fr=Ce n'est pas une question de {kw}.|Je n'écris pas au sujet de {kw}.|Ma demande ne porte pas sur {kw}.|{kw} n'est pas la raison de mon message.
es=No se trata de {kw}.|No escribo por el tema de {kw}.|Mi consulta no es sobre {kw}.|El motivo de mi mensaje no es {kw}.
ru=Дело не в теме «{kw}».|Я пишу не по поводу «{kw}».|Мой вопрос не касается темы «{kw}».|Тема «{kw}» здесь ни при чём.
zh=这与{kw}无关。|我联系你们不是因为{kw}。|我要说的事不涉及{kw}。|这封信说的不是{kw}。
ja={kw}の件ではありません。|今回は{kw}についての連絡ではありません。|{kw}に関するお問い合わせではないです。|用件は{kw}ではありません。
hi=यह {kw} के बारे में नहीं है।|इस संदेश का विषय {kw} नहीं है।|मेरी पूछताछ {kw} से जुड़ी नहीं है।|यह संदेश {kw} को लेकर नहीं है।
""", "hard/train/not_about"),
    settled=_table("""
en=The earlier {kw} matter is already closed.|The {kw} issue was resolved a while ago.|My {kw} request has already been handled.|Everything about {kw} was taken care of earlier.
de=Die frühere Sache mit {kw} ist schon erledigt.|Das Thema {kw} wurde bereits gelöst.|Meine Anfrage zu {kw} ist längst bearbeitet.|Die Angelegenheit {kw} ist inzwischen abgeschlossen.
fr=L'ancienne affaire de {kw} est déjà close.|Le problème de {kw} a été résolu il y a quelque temps.|Ma demande concernant {kw} a déjà été traitée.|Le dossier {kw} est clos depuis un moment.
es=El asunto anterior de {kw} ya está cerrado.|El tema de {kw} se solucionó hace tiempo.|Mi petición sobre {kw} ya fue atendida.|La cuestión de {kw} quedó resuelta hace días.
ru=Прежний вопрос про «{kw}» уже закрыт.|Вопрос с «{kw}» давно решён.|Мою заявку по теме «{kw}» уже обработали.|С темой «{kw}» всё решилось ещё раньше.
zh=以前{kw}的事已经处理好了。|{kw}的问题早就解决了。|我那个{kw}的申请已经办完了。|{kw}那件事之前就搞定了。
ja=以前の{kw}の件はもう対応してもらいました。|{kw}の件はすでに解決済みです。|{kw}についての依頼はもう片付きました。|{kw}のことは先日済ませてもらいました。
hi={kw} वाला पुराना मामला पहले ही निपट चुका है।|{kw} वाली समस्या पहले ही सुलझ गई थी।|{kw} से जुड़ा मेरा अनुरोध पूरा हो चुका है।|{kw} का मसला कब का हल हो गया।
""", "hard/train/settled"),
    main_side=_table("""
en=Mainly this is about {main}; {side} is only a side note.|My main concern is {main}; {side} is secondary.|I'm writing chiefly about {main}, with a small remark on {side}.|{main} is what matters here; {side} can wait.
de=Hauptsächlich geht es um {main}; {side} ist nur eine Randbemerkung.|Mein Hauptanliegen ist {main}; {side} ist zweitrangig.|Ich schreibe in erster Linie wegen {main}, {side} nur am Rande.|Wichtig ist {main}; {side} kann warten.
fr=Il s'agit surtout de {main} ; {side} n'est qu'un détail.|Ma préoccupation principale, c'est {main} ; {side} est secondaire.|J'écris principalement à propos de {main}, et accessoirement de {side}.|L'essentiel ici, c'est {main} ; {side} peut attendre.
es=Se trata sobre todo de {main}; {side} es solo un detalle.|Mi preocupación principal es {main}; {side} es secundario.|Escribo principalmente por {main}, y de paso por {side}.|Lo importante aquí es {main}; {side} puede esperar.
ru=В основном речь о «{main}»; «{side}» — лишь мелочь.|Главное для меня — «{main}»; «{side}» второстепенно.|Пишу в первую очередь про «{main}», а «{side}» упоминаю попутно.|Важна тема «{main}»; «{side}» может подождать.
zh=主要是{main}的问题，{side}是小事。|我最关心的是{main}，{side}是次要的。|这次主要为了{main}，顺便提一下{side}。|关键在于{main}，{side}可以先放一放。
ja=主に{main}の件で、{side}はついでです。|一番の用件は{main}で、{side}は二の次です。|今回は{main}が中心で、{side}は少し触れるだけです。|大事なのは{main}のほうで、{side}は後回しで構いません。
hi=मुख्य बात {main} की है; {side} बस एक छोटी बात है।|मेरी मुख्य चिंता {main} है; {side} बाद की बात है।|मैं ख़ास तौर पर {main} के लिए लिख रहा हूँ, {side} का ज़िक्र बस साथ में है।|असल ज़रूरत {main} की है; {side} रुक सकता है।
""", "hard/train/main_side"),
    urgency_before=_table("""
en=At first it looked {t}, but that has changed.|It seemed {t} at the start, but not anymore.|Initially I'd have called it {t}; that's no longer the case.|This was {t} earlier on, but the situation has shifted.
de=Anfangs wirkte es {t}, aber das hat sich geändert.|Zuerst schien es {t}, inzwischen nicht mehr.|Ursprünglich hätte ich es {t} genannt, das trifft nicht mehr zu.|Vorher war es {t}, jetzt sieht die Lage anders aus.
fr=Au début, cela semblait {t}, mais cela a changé.|Au départ, ça paraissait {t}, ce n'est plus le cas.|J'aurais d'abord dit {t}, mais la situation a évolué.|Plus tôt, c'était {t} ; ce n'est plus vrai maintenant.
es=Al principio parecía {t}, pero eso ha cambiado.|Al comienzo parecía {t}, pero ya no es así.|En un primer momento lo habría calificado de {t}, pero la situación evolucionó.|Antes era {t}; ahora ya no lo es.
ru=Сначала я оценил бы это как «{t}», но всё изменилось.|Вначале я назвал бы это «{t}», но теперь это не так.|Изначально я оценивал срочность как «{t}», сейчас она другая.|Ещё недавно это было «{t}», но теперь ситуация иная.
zh=以前看是{t}的，现在情况不同了。|起初看起来是{t}的，现在已经不是了。|一开始我会说是{t}的，现在不一样了。|原先算是{t}的，如今情况变了。
ja=前は{t}に見えましたが、今は違います。|最初は{t}だと思いましたが、今はそうではありません。|はじめは{t}という判断でしたが、状況が変わりました。|以前なら{t}と言えましたが、もうそうではないです。
hi=शुरू में यह {t} लगा था, पर अब बात बदल गई है।|पहले यह {t} लग रहा था, पर अब ऐसा नहीं है।|शुरुआत में मैं इसे {t} कहता, लेकिन स्थिति बदल चुकी है।|कुछ समय पहले तक यह {t} था, अब नहीं।
""", "hard/train/urgency_before"),
    mood_before=_table("""
en=Earlier I was {t}, but that has passed.|I was {t} before, but I've calmed down since.|For a while I felt {t}; that's over now.|At the time I was {t}, though not anymore.
de=Vorhin war ich {t}, aber das ist vorbei.|Zunächst war ich {t}, inzwischen nicht mehr.|Eine Zeit lang war ich {t}, das hat sich gelegt.|Damals war ich {t}, jetzt sehe ich es gelassener.
fr=Tout à l'heure, j'étais {t}, mais c'est passé.|Sur le moment, j'étais {t}, mais ça m'est passé.|Pendant un temps, j'ai été {t} ; ce n'est plus le cas.|Au départ j'étais {t}, je ne le suis plus.
es=Antes estaba {t}, pero ya se me pasó.|Hace un rato estaba {t}, pero ya no.|Durante un tiempo estuve {t}; eso ya pasó.|En su momento me sentí {t}, ahora no.
ru=Раньше я был {t}, но это прошло.|Какое-то время я был {t}, но это уже в прошлом.|Поначалу я был {t}, сейчас уже нет.|Тогда я был {t}, а теперь успокоился.
zh=以前我{t}，现在好了。|刚才我{t}，现在已经平静了。|之前我一度{t}，现在没事了。|那时候我{t}，现在已经过去了。
ja=さっきまでは{t}でしたが、もう平気です。|最初は{t}でしたが、今は落ち着きました。|一時は{t}でしたが、もう過ぎたことです。|その時は{t}でしたが、今はそうでもありません。
hi=पहले मैं {t} था, पर अब वह बीत गया।|कुछ देर पहले मैं {t} था, अब नहीं हूँ।|उस वक़्त मैं {t} था, पर अब शांत हूँ।|शुरू में मैं {t} था, वह भाव अब नहीं रहा।
""", "hard/train/mood_before"),
    rating_before=_table("""
en=Last time I gave {n} out of {m}.|Previously I rated it {n} out of {m}.|My earlier score was {n} out of {m}.|Back then I gave it {n} out of {m}.
de=Letztes Mal gab ich {n} von {m}.|Zuvor hatte ich {n} von {m} vergeben.|Früher lag meine Wertung bei {n} von {m}.|Damals gab ich {n} von {m} Punkten.
fr=La dernière fois, j'avais mis {n} sur {m}.|Auparavant, j'avais donné {n} sur {m}.|Ma note précédente était de {n} sur {m}.|À l'époque, j'ai mis {n} sur {m}.
es=La última vez di {n} de {m}.|Anteriormente puse {n} de {m}.|Mi puntuación anterior fue {n} de {m}.|En aquel momento di {n} de {m}.
ru=В прошлый раз я ставил {n} из {m}.|Ранее я оценил на {n} из {m}.|Моя прежняя оценка была {n} из {m}.|Тогда я поставил {n} из {m}.
zh=上回我给了{n}分（满分{m}）。|此前给出的分数是{n}分（满分{m}）。|我原来的评分是{n}分（满分{m}）。|当初我的打分为{n}分（满分{m}）。
ja=前回は{m}点中{n}点でした。|以前は{m}点満点で{n}点にしていました。|最初の評価は{m}点中{n}点でした。|あのときは{m}点中{n}点にしました。
hi=पिछली बार मैंने {m} में से {n} दिए थे।|शुरू में मैंने इसे {m} में से {n} अंक दिए।|मेरी पिछली रेटिंग {m} में से {n} थी।|उस समय मैंने {m} में से {n} दिए।
""", "hard/train/rating_before"),
    fact_keep=_table("""
en={s}, no doubt about it.|{s}, there's no question about that.|{s}, I'm not making this up.|{s}, no exaggeration.
de={s}, ohne Zweifel.|{s}, daran gibt es nichts zu rütteln.|{s}, das ist nicht übertrieben.|{s}, das denke ich mir nicht aus.
fr={s}, sans aucun doute.|{s}, je n'invente rien.|{s}, il n'y a pas de doute là-dessus.|{s}, je n'exagère pas.
es={s}, sin ninguna duda.|{s}, no me lo invento.|{s}, no exagero nada.|{s}, de eso no hay duda.
ru={s}, без всяких сомнений.|{s}, я ничего не выдумываю.|{s}, ни капли не преувеличиваю.|{s}, тут нет никаких сомнений.
zh={s}，这一点不用再问。|{s}，我没有夸张。|{s}，绝不是随便说说。|{s}，这点毫无疑问。
ja={s}、うそではありません。|{s}、間違いありません。|{s}、大げさに言っているのではありません。|{s}、作り話ではないです。
hi={s}, इसमें कोई शक नहीं।|{s}, इसमें ज़रा भी अतिशयोक्ति नहीं।|{s}, यह मनगढ़ंत बात नहीं है।|{s}, इस पर कोई सवाल ही नहीं।
""", "hard/train/fact_keep"),
    fact_retract=_table("""
en=Please ignore my line "{s}", I wrote it by mistake.|I take back "{s}", that no longer applies.|Correction: "{s}" is not true anymore.|Please delete "{s}" from my message, it doesn't apply.
de=Bitte übergehen Sie meinen Satz "{s}", der kam aus Versehen.|Ich nehme "{s}" zurück, das stimmt nicht mehr.|Korrektur: "{s}" gilt nicht mehr.|Vergessen Sie bitte "{s}", das war falsch von mir.
fr=Merci d'oublier ma phrase « {s} », écrite par erreur.|Je retire « {s} », ce n'est plus d'actualité.|Correction : « {s} » n'est plus valable.|Supprimez « {s} » de mon message, c'était inexact.
es=Olviden mi frase «{s}», la escribí por error.|Retiro lo de «{s}», ya no es así.|Corrección: «{s}» ya no es válido.|Quiten «{s}» de mi mensaje, no era correcto.
ru=Прошу забыть фразу «{s}», я написал её по ошибке.|Беру назад слова «{s}», это уже неверно.|Поправка: «{s}» больше не актуально.|Удалите из моего сообщения «{s}», это было неправильно.
zh="{s}"这一条我写的有问题，请删除。|我收回"{s}"这句话，已经不是这样了。|更正："{s}"这一点现在不成立了。|请把"{s}"从我的消息里去掉，那句不对。
ja="{s}"は書きまちがいなので、取り消します。|"{s}"は撤回します。事実と違っていました。|訂正です。"{s}"はもう当てはまりません。|"{s}"という部分は削除してください。間違いでした。
hi="{s}" वाली पंक्ति ग़लती से लिखी गई थी, उसे छोड़ दें।|"{s}" वाली बात मैं वापस लेता हूँ, वह अब सही नहीं है।|"{s}" — यह पंक्ति हटा दीजिए, यह सही नहीं थी।|सुधार: "{s}" अब लागू नहीं होता।
""", "hard/train/fact_retract"),
)

_VALIDATION = HardWording("validation", option_description=_table("""
en=topics such as {words}
de=Themen wie {words}
fr=des sujets tels que {words}
es=temas como {words}
ru=например: {words}
zh={words}一类的事
ja={words}といった話題
hi={words} जैसे विषय
""", "hard/validation/option_description"),
    not_about=_table("""
en=My message has nothing to do with {kw}.
de=Mit {kw} hat meine Nachricht nichts zu tun.
fr=Mon message n'a rien à voir avec {kw}.
es=Mi mensaje no tiene nada que ver con {kw}.
ru=Моё сообщение никак не связано с темой «{kw}».
zh=我的消息与{kw}没有关系。
ja=このメッセージは{kw}とは関係ありません。
hi=मेरे संदेश का {kw} से कोई लेना-देना नहीं है।
""", "hard/validation/not_about"),
    settled=_table("""
en=My {kw} question was answered last week.
de=Meine Frage zu {kw} wurde letzte Woche beantwortet.
fr=Ma question sur {kw} a reçu une réponse la semaine dernière.
es=Mi consulta sobre {kw} se resolvió la semana pasada.
ru=Мой вопрос про «{kw}» решили на прошлой неделе.
zh=我关于{kw}的问题上周已经处理好了。
ja={kw}の問い合わせには先週答えてもらいました。
hi={kw} वाला मेरा सवाल पिछले हफ़्ते हल हो गया।
""", "hard/validation/settled"),
    main_side=_table("""
en=Above all it concerns {main}; {side} matters much less.
de=Vor allem betrifft es {main}; {side} ist viel weniger wichtig.
fr=Cela concerne avant tout {main} ; {side} importe beaucoup moins.
es=Sobre todo afecta a {main}; {side} importa mucho menos.
ru=Прежде всего это касается темы «{main}»; «{side}» гораздо менее важно.
zh=重要的是{main}，{side}可以后说。
ja=何より{main}の件で、{side}はそれほど重要ではありません。
hi=सबसे ज़रूरी {main} है; {side} उतना अहम नहीं।
""", "hard/validation/main_side"),
    urgency_before=_table("""
en=Yesterday I would have said {t}; today it is different.
de=Gestern hätte ich {t} gesagt; heute ist es anders.
fr=Hier, j'aurais dit {t} ; aujourd'hui c'est différent.
es=Ayer habría dicho {t}; hoy es distinto.
ru=Вчера я бы сказал «{t}»; сегодня всё иначе.
zh=上周我会说是{t}的，今天不同了。
ja=先週なら{t}と言ったでしょうが、今日は違います。
hi=कल मैं इसे {t} कहता; आज बात अलग है।
""", "hard/validation/urgency_before"),
    mood_before=_table("""
en=This morning I was {t}; now I feel otherwise.
de=Heute Morgen war ich {t}; jetzt fühle ich mich anders.
fr=Ce matin, j'étais {t} ; maintenant c'est autre chose.
es=Esta mañana estaba {t}; ahora me siento de otra forma.
ru=Утром я был {t}; сейчас всё иначе.
zh=今天上午我还{t}，现在心情不同了。
ja=午前中は{t}でしたが、今は違います。
hi=आज सुबह मैं {t} था; अब मन बदल गया है।
""", "hard/validation/mood_before"),
    rating_before=_table("""
en=My first review gave {n} out of {m}.
de=Meine erste Bewertung gab {n} von {m}.
fr=Ma première évaluation donnait {n} sur {m}.
es=Mi primera reseña daba {n} de {m}.
ru=В первом отзыве я поставил {n} из {m}.
zh=我头一回评价给的是{n}分（满分{m}）。
ja=前のレビューでは{m}点中{n}点でした。
hi=मेरी पहली समीक्षा में {m} में से {n} थे।
""", "hard/validation/rating_before"),
    fact_keep=_table("""
en={s}, I can't stress that enough.
de={s}, das kann ich nicht genug betonen.
fr={s}, je ne le dirai jamais assez.
es={s}, no lo puedo decir más claro.
ru={s}, и никак иначе.
zh={s}，这点不用多说。
ja={s}、これはゆずれません。
hi={s}, इसमें कोई दो राय नहीं।
""", "hard/validation/fact_keep"),
    fact_retract=_table("""
en=Scratch my earlier sentence "{s}", it was a typo.
de=Streichen Sie meinen früheren Satz "{s}", das war ein Tippfehler.
fr=Rayez ma phrase « {s} », c'était une faute de frappe.
es=Borren mi frase anterior «{s}», fue una errata.
ru=Вычеркните мою фразу «{s}», это была опечатка.
zh=请删除我写的"{s}"，是打字出了问题。
ja=先ほどの"{s}"は打ちまちがいでした。
hi=मेरी पिछली पंक्ति "{s}" हटा दें, वह टाइपिंग की ग़लती थी।
""", "hard/validation/fact_retract"),
)

_HELDOUT = HardWording("heldout", option_description=_table("""
en=anything involving {words}
de=alles rund um {words}
fr=tout ce qui touche à {words}
es=todo lo relacionado con {words}
ru=всё, что связано с: {words}
zh=所有涉及{words}的事
ja={words}にかかわることすべて
hi={words} से संबंधित सब कुछ
""", "hard/heldout/option_description"),
    not_about=_table("""
en=To be clear, the topic is not {kw}.
de=Zur Klarstellung: {kw} ist hier nicht das Thema.
fr=Pour être clair, le sujet n'est pas {kw}.
es=Para que quede claro, el tema no es {kw}.
ru=Уточню: тема не «{kw}».
zh=先说明一下，这件事不是关于{kw}的。
ja=先に言っておくと、これは{kw}の話ではありません。
hi=साफ़ कर दूँ, यह {kw} का मामला नहीं है।
""", "hard/heldout/not_about"),
    settled=_table("""
en=The {kw} part was already sorted out by your colleague.
de=Das mit {kw} hat Ihr Kollege schon geklärt.
fr=La partie {kw} a déjà été réglée par votre collègue.
es=Lo de {kw} ya lo arregló su compañero.
ru=Вопрос «{kw}» ваш коллега уже уладил.
zh={kw}这部分您的同事已经帮我办好了。
ja={kw}の部分は同僚さんがもう対応してくれました。
hi={kw} वाला हिस्सा आपके सहकर्मी ने पहले ही सुलझा दिया है।
""", "hard/heldout/settled"),
    main_side=_table("""
en={side} came up briefly, but the real issue is {main}.
de={side} kam kurz zur Sprache, aber eigentlich geht es um {main}.
fr={side} a été évoqué en passant, mais le vrai sujet est {main}.
es={side} salió de pasada, pero el problema real es {main}.
ru=«{side}» упоминалось мельком, но настоящая проблема — «{main}».
zh={side}是小问题，真正的问题是{main}。
ja={side}は少し話しただけで、本当の問題は{main}です。
hi={side} का ज़िक्र बस यूँ ही हुआ, असली मसला {main} है।
""", "hard/heldout/main_side"),
    urgency_before=_table("""
en=Last week this was {t}, things have moved since.
de=Letzte Woche war das {t}, seitdem hat sich einiges getan.
fr=La semaine dernière, c'était {t}, les choses ont bougé depuis.
es=La semana pasada esto era {t}, desde entonces ha cambiado.
ru=На прошлой неделе это было «{t}», с тех пор всё поменялось.
zh=上周这还是{t}的，后来情况不同了。
ja=先週は{t}でしたが、その後いろいろ動きました。
hi=पिछले हफ़्ते यह {t} था, तब से हालात बदल गए हैं।
""", "hard/heldout/urgency_before"),
    mood_before=_table("""
en=When I first wrote I was {t}, that is behind me now.
de=Beim ersten Schreiben war ich {t}, das liegt hinter mir.
fr=Quand j'ai écrit la première fois, j'étais {t}, c'est derrière moi.
es=Cuando escribí la primera vez estaba {t}, eso ya quedó atrás.
ru=Когда я писал впервые, я был {t}, теперь это позади.
zh=上回写信我还{t}，现在已经好了。
ja=はじめに書いたときは{t}でしたが、今はもう違います。
hi=पहली बार लिखते समय मैं {t} था, अब वह बात पुरानी हो गई।
""", "hard/heldout/mood_before"),
    rating_before=_table("""
en=Before the update I rated {n} out of {m}.
de=Vor dem Update gab ich {n} von {m}.
fr=Avant la mise à jour, j'avais noté {n} sur {m}.
es=Antes de la actualización puse {n} de {m}.
ru=До обновления я ставил {n} из {m}.
zh=更新前我打的是{n}分（满分{m}）。
ja=アップデート前は{m}点中{n}点を付けていました。
hi=अपडेट से पहले मैंने {m} में से {n} दिए थे।
""", "hard/heldout/rating_before"),
    fact_keep=_table("""
en={s}, and I am not joking.
de={s}, und das ist kein Scherz.
fr={s}, et je ne plaisante pas.
es={s}, y no es broma.
ru={s}, и это не шутка.
zh={s}，这不是小事。
ja={s}、じょうだんではありません。
hi={s}, मैं मज़ाक नहीं कर रहा।
""", "hard/heldout/fact_keep"),
    fact_retract=_table("""
en=Please disregard the line "{s}", it was sent by mistake.
de=Bitte ignorieren Sie den Satz "{s}", er wurde versehentlich gesendet.
fr=Veuillez ignorer la phrase « {s} », envoyée par erreur.
es=Ignoren la frase «{s}», se envió por error.
ru=Прошу пропустить фразу «{s}», она отправлена по ошибке.
zh=请删除"{s}"这一条，是多发的。
ja="{s}"という一文は誤って送ったものです。
hi="{s}" वाली पंक्ति को अनदेखा करें, वह ग़लती से भेजी गई थी।
""", "hard/heldout/fact_retract"),
)

HARD_WORDINGS: dict[str, HardWording] = {w.name: w for w in (_TRAIN, _VALIDATION, _HELDOUT)}

# heldout_hard: held-out state sentences, new instruction wording (every family the hard cases ask about).
HELDOUT_HARD: TemplateGroup = dataclasses.replace(
    TEMPLATE_GROUPS["heldout"],
    name="heldout_hard",
    instructions={
        "department": _table("""
en=To which group should this be forwarded?|Pick who deals with this.
de=An welche Gruppe soll das weitergehen?|Wähle, wer das bearbeitet.
fr=À quel groupe faut-il transmettre ceci ?|Choisis qui s'en charge.
es=¿A qué grupo hay que reenviar esto?|Elige quién se encarga de esto.
ru=Какой группе переслать это?|Выбери, кто этим займётся.
zh=这件事该转给哪个团队？|选出处理此事的人。
ja=これはどのグループに回すべきですか？|対応する担当を選んでください。
hi=इसे किस समूह को भेजा जाए?|चुनें कि इसे कौन देखेगा।
""", "heldout_hard/department"),
        "product": _table("""
en=What piece of equipment is this about?|Which of these products is meant?
de=Um welches Gerät handelt es sich?|Welches dieser Produkte ist gemeint?
fr=De quel équipement s'agit-il ?|Lequel de ces produits est visé ?
es=¿De qué aparato se trata?|¿Cuál de estos productos se menciona?
ru=О каком оборудовании идёт речь?|Какой из этих продуктов имеется в виду?
zh=这说的是哪个设备？|是以下哪个产品？
ja=どの機器の話ですか？|以下のうちどの製品のことですか？
hi=यह किस उपकरण के बारे में है?|इनमें से कौन सा उत्पाद मतलब है?
""", "heldout_hard/product"),
        "urgency": _table("""
en=How soon must someone act on this?|Where does this sit between low and high priority?
de=Wie bald muss jemand handeln?|Wo liegt das zwischen niedriger und hoher Priorität?
fr=Dans quel délai faut-il agir ?|Où se situe ceci entre faible et forte priorité ?
es=¿Cuándo hay que actuar sobre esto?|¿Dónde queda esto entre prioridad baja y alta?
ru=Как скоро нужно действовать?|Где это между низким и высоким приоритетом?
zh=多快需要有人处理？|这件事有多急？
ja=どれくらい急いで手を打つ必要がありますか？|優先度で言うと、これはどのあたりですか？
hi=इस पर कितनी जल्दी कार्रवाई होनी चाहिए?|कम और ज़्यादा प्राथमिकता के बीच यह कहाँ है?
""", "heldout_hard/urgency"),
        "mood": _table("""
en=What mood comes through in the message?|How is the sender feeling?
de=Welche Stimmung spricht aus der Nachricht?|Wie geht es dem Absender gefühlsmäßig?
fr=Quelle humeur ressort du message ?|Comment se sent l'expéditeur ?
es=¿Qué ánimo se nota en el mensaje?|¿Cómo se siente el remitente?
ru=Какое настроение чувствуется в сообщении?|Что чувствует отправитель?
zh=消息里有什么情绪？|发件人是什么心情？
ja=メッセージからどんな気分が読み取れますか？|送り主はどう感じていますか？
hi=संदेश से कैसा मूड झलकता है?|भेजने वाला कैसा महसूस कर रहा है?
""", "heldout_hard/mood"),
        "rating": _table("""
en=What did the sender score us?|Give the number of points in the review.
de=Welche Punktzahl gab uns der Absender?|Nenne die Punktzahl aus der Bewertung.
fr=Quelle note nous a donnée l'expéditeur ?|Donne le nombre de points de l'évaluation.
es=¿Qué puntuación nos dio el remitente?|Da el número de puntos de la reseña.
ru=Какую оценку нам дал отправитель?|Назови число баллов из рецензии.
zh=发件人给我们打了多少分？|给出评价里的分数。
ja=送り主は何点を付けてくれましたか？|レビューの点数を答えてください。
hi=भेजने वाले ने हमें कितने अंक दिए?|समीक्षा के अंक बताएं।
""", "heldout_hard/rating"),
    },
    noul_frames=_table("""
en=Based on the message: {s}|Yes or no? {s}
de=Laut Nachricht: {s}|Ja oder nein? {s}
fr=D'après le message : {s}|Oui ou non ? {s}
es=Según el mensaje: {s}|¿Sí o no? {s}
ru=Судя по сообщению: {s}|Да или нет? {s}
zh=按消息来看：{s}|是还是不是？{s}
ja=メッセージによると：{s}|はいかいいえか？{s}
hi=संदेश के अनुसार: {s}|हाँ या ना? {s}
""", "heldout_hard/noul"),
)
