"""Sentence templates, split into three disjoint groups: `train` (train + calib splits), `heldout` and
`validation`.

The held-out group never shares a template string with the training group, so a model that memorised
training sentences cannot solve held-out data. The validation group is a third wording, disjoint from
both: training decisions read it, so they are judged on unseen wording without touching held-out data.
All groups fill their slots from `laya_opt.suites.synthetic.lexicon`.
Tables are `lang=template|template|...` lines; slots are `{kw}` (cue term), `{t}` (scale term),
`{n}`/`{m}` (rating), `{s}` (noul statement).

Why one ~600-line module: it is data, not logic (three wording tables of ~170 lines and a 40-line
parser). Kept in one file, the three groups sit side by side, so a new template is written against the
wordings it must not repeat (tests/suites/test_generator.py checks that the groups are disjoint).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from laya_opt.suites.synthetic.lexicon import LANGUAGES


def group_of(split: str) -> str:
    """Template group of a split: held-out and validation data use their own templates, calib shares training's."""
    if split in ("heldout", "validation"):
        return split
    if split in ("train", "calib"):
        return "train"
    raise ValueError(f"unknown split {split!r}; expected one of train, calib, heldout, validation")


def _table(text: str, name: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for lineno, line in enumerate(text.strip().splitlines(), 1):
        lang, sep, rest = line.partition("=")
        items = tuple(x.strip() for x in rest.split("|") if x.strip())
        if not sep or lang not in LANGUAGES or not items or lang in out:
            raise ValueError(f"templates table {name!r} line {lineno}: bad row {line!r}")
        out[lang] = items
    if set(out) != set(LANGUAGES):
        raise ValueError(f"templates table {name!r}: languages {sorted(out)}, expected {sorted(LANGUAGES)}")
    return out


@dataclass(frozen=True)
class TemplateGroup:
    name: str
    instructions: dict[str, dict[str, tuple[str, ...]]]  # family -> lang -> instruction strings
    noul_frames: dict[str, tuple[str, ...]]              # lang -> frames around a statement {s}
    slots: dict[str, dict[str, tuple[str, ...]]]         # slot -> lang -> state sentence frames
    fillers: dict[str, tuple[str, ...]]                  # lang -> neutral sentences (no cues)
    assistant: dict[str, tuple[str, ...]]                # lang -> assistant chat turns
    greetings: dict[str, tuple[str, ...]]
    closings: dict[str, tuple[str, ...]]
    case_word: dict[str, tuple[str, ...]]                # lang -> word for ticket/case headers
    log_filler: tuple[str, ...]                          # language-independent INFO messages ({n})
    log_line: str                                        # layout of one log line
    json_keys: tuple[str, ...]                           # id, channel, subject, message, history
    # band (low | high) -> lang -> sentences stating an urgency without its scale term; empty: none
    # (training only: topic_frames.with_urgency_phrases)
    urgency_phrases: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    urgency_phrase_share: float = 0.35   # of urgency slots, when there are phrases
    # fact id -> lang -> (sentences when it holds, when it fails), said in free words; empty: none
    # (training: fact_phrasings.with_fact_phrasings; the `phrasings` suite: its validation table)
    fact_phrasings: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = field(default_factory=dict)
    fact_phrasing_share: float = 0.5     # of fact slots, when there are phrasings

    def all_strings(self) -> list[str]:
        """Every template string of the group (for disjointness checks)."""
        out: list[str] = []
        for table in (*self.instructions.values(), *self.slots.values(), self.noul_frames, self.fillers,
                      self.assistant, self.greetings, self.closings, *self.urgency_phrases.values()):
            for items in table.values():
                out.extend(items)
        out.extend(sentence for table in self.fact_phrasings.values() for sides in table.values()
                   for side in sides for sentence in side)
        out.extend(self.log_filler)
        out.append(self.log_line)
        return out


# Word of the ticket/case headers, one column per group: train, heldout, validation.
_CASE_WORDS = _table("""
en=Ticket|Case|Request
de=Ticket|Fall|Vorgang
fr=Ticket|Dossier|Demande
es=Ticket|Caso|Solicitud
ru=Заявка|Обращение|Запрос
zh=工单|案例|请求
ja=チケット|案件|依頼
hi=टिकट|मामला|अनुरोध
""", "case_word")


def _case_word(group: int) -> dict[str, tuple[str, ...]]:
    return {lang: words[group:group + 1] for lang, words in _CASE_WORDS.items()}


_TRAIN = TemplateGroup("train", instructions={
        "department": _table("""
en=Which department should handle this ticket?|Route this request to the right team.|Pick the team responsible for this message.
de=Welche Abteilung soll dieses Ticket bearbeiten?|Leite diese Anfrage an das richtige Team weiter.|Wähle das zuständige Team für diese Nachricht.
fr=Quel service doit traiter ce ticket ?|Oriente cette demande vers la bonne équipe.|Choisis l'équipe responsable de ce message.
es=¿Qué departamento debe atender este ticket?|Dirige esta solicitud al equipo correcto.|Elige el equipo responsable de este mensaje.
ru=Какой отдел должен обработать этот тикет?|Направь этот запрос в нужную команду.|Выбери команду, ответственную за это сообщение.
zh=哪个部门应该处理这张工单？|把这个请求分配给正确的团队。|选择负责这条消息的团队。
ja=このチケットはどの部署が対応すべきですか？|この依頼を適切なチームに振り分けてください。|このメッセージの担当チームを選んでください。
hi=इस टिकट को कौन सा विभाग संभालेगा?|इस अनुरोध को सही टीम को भेजें।|इस संदेश के लिए ज़िम्मेदार टीम चुनें।
""", "train/department"),
        "product": _table("""
en=Which product is the customer writing about?|Identify the product mentioned in this message.|What device does this concern?
de=Um welches Produkt geht es dem Kunden?|Bestimme das erwähnte Produkt.|Welches Gerät ist betroffen?
fr=De quel produit parle le client ?|Identifie le produit mentionné dans ce message.|Quel appareil est concerné ?
es=¿De qué producto habla el cliente?|Identifica el producto mencionado en este mensaje.|¿Qué dispositivo está afectado?
ru=О каком продукте пишет клиент?|Определи продукт, упомянутый в сообщении.|Какое устройство затронуто?
zh=客户在说哪款产品？|找出消息中提到的产品。|涉及的是哪个设备？
ja=お客様はどの製品について書いていますか？|メッセージに出てくる製品を特定してください。|どの機器が関係していますか？
hi=ग्राहक किस उत्पाद के बारे में लिख रहा है?|संदेश में बताए गए उत्पाद की पहचान करें।|कौन सा डिवाइस प्रभावित है?
""", "train/product"),
        "urgency": _table("""
en=How pressing is this request?|Rate the priority of this message.|Assess the impact of the issue.
de=Wie eilig ist diese Anfrage?|Bewerte die Priorität dieser Nachricht.|Schätze die Tragweite des Problems ein.
fr=Quel est le degré de priorité de cette demande ?|Évalue la priorité de ce message.|Estime la portée du problème.
es=¿Qué prioridad tiene esta solicitud?|Evalúa la prioridad de este mensaje.|Estima el nivel de impacto del problema.
ru=Какой приоритет у этого запроса?|Оцени приоритет этого сообщения.|Оцени тяжесть проблемы.
zh=这个请求的优先级如何？|评估这条消息的优先级。|判断问题的影响程度。
ja=この依頼の優先度はどのくらいですか？|このメッセージの優先度を評価してください。|問題の影響度を見積もってください。
hi=इस अनुरोध की प्राथमिकता क्या है?|इस संदेश की प्राथमिकता आँकें।|समस्या के असर का स्तर बताएं।
""", "train/urgency"),
        "mood": _table("""
en=How does the customer feel?|Rate the customer's mood.|What is the emotional tone of the writer?
de=Wie fühlt sich der Kunde?|Bewerte die Stimmung des Kunden.|Welchen emotionalen Ton hat der Verfasser?
fr=Comment se sent le client ?|Évalue l'humeur du client.|Quel est le ton émotionnel de l'auteur ?
es=¿Cómo se siente el cliente?|Evalúa el estado de ánimo del cliente.|¿Cuál es el tono emocional del autor?
ru=Как себя чувствует клиент?|Оцени настроение клиента.|Какой эмоциональный тон у автора?
zh=客户的感受如何？|评估客户的情绪。|作者的情感基调是什么？
ja=お客様はどう感じていますか？|お客様の気分を評価してください。|書き手の感情のトーンは？
hi=ग्राहक कैसा महसूस कर रहा है?|ग्राहक के मूड का आकलन करें।|लेखक का भावनात्मक लहजा क्या है?
""", "train/mood"),
        "rating": _table("""
en=What rating did the customer give?|Which score did the reviewer assign?|Read off the customer's rating.
de=Welche Bewertung hat der Kunde abgegeben?|Welche Punktzahl hat der Rezensent vergeben?|Lies die Bewertung des Kunden ab.
fr=Quelle note le client a-t-il donnée ?|Quel score l'évaluateur a-t-il attribué ?|Relève la note du client.
es=¿Qué calificación dio el cliente?|¿Qué puntuación asignó el evaluador?|Lee la valoración del cliente.
ru=Какую оценку поставил клиент?|Какой балл выставил рецензент?|Считай оценку клиента.
zh=客户给了多少分？|评论者给出的分数是多少？|读出客户的评分。
ja=お客様は何点をつけましたか？|レビュアーがつけたスコアは？|お客様の評価点を読み取ってください。
hi=ग्राहक ने क्या रेटिंग दी?|समीक्षक ने कौन सा स्कोर दिया?|ग्राहक की रेटिंग पढ़ें।
""", "train/rating"),
        "severity": _table("""
en=What is the level of the alert in this log?|Classify the log alert by level.|Which log level does the incident have?
de=Welches Level hat der Alarm in diesem Log?|Ordne den Log-Alarm nach Level ein.|Welches Log-Level hat der Vorfall?
fr=Quel est le niveau de l'alerte dans ce journal ?|Classe l'alerte du journal par niveau.|Quel niveau de journal a l'incident ?
es=¿Cuál es el nivel de la alerta en este registro?|Clasifica la alerta del registro por nivel.|¿Qué nivel de registro tiene el incidente?
ru=Какой уровень у оповещения в этом логе?|Классифицируй оповещение в логе по уровню.|Какой уровень лога у инцидента?
zh=这条日志中告警的级别是什么？|按级别对日志告警分类。|该事件的日志级别是什么？
ja=このログのアラートのレベルは？|ログのアラートをレベルで分類してください。|このインシデントのログレベルは？
hi=इस लॉग में अलर्ट का स्तर क्या है?|लॉग अलर्ट को स्तर के अनुसार वर्गीकृत करें।|घटना का लॉग स्तर क्या है?
""", "train/severity"),
    },
    noul_frames=_table("""
en={s}|True or false: {s}
de={s}|Wahr oder falsch: {s}
fr={s}|Vrai ou faux : {s}
es={s}|Verdadero o falso: {s}
ru={s}|Верно или нет: {s}
zh={s}|判断真假：{s}
ja={s}|正しいか誤りか：{s}
hi={s}|सही या गलत: {s}
""", "train/noul"),
    slots={
        "department": _table("""
en=I have a problem related to {kw}.|Subject: {kw}.|This message concerns {kw}.
de=Ich habe ein Problem im Bereich {kw}.|Betreff: {kw}.|Diese Nachricht betrifft das Thema {kw}.
fr=J'ai un problème concernant : {kw}.|Objet : {kw}.|Ce message porte sur le sujet suivant : {kw}.
es=Tengo un problema relacionado con: {kw}.|Asunto: {kw}.|Este mensaje trata sobre el tema: {kw}.
ru=У меня проблема по теме «{kw}».|Тема: {kw}.|Это сообщение касается темы «{kw}».
zh=我遇到了关于{kw}的问题。|主题：{kw}。|这条消息涉及{kw}。
ja={kw}について問題があります。|件名：{kw}。|このメッセージは{kw}に関するものです。
hi=मुझे {kw} से जुड़ी समस्या है।|विषय: {kw}।|यह संदेश {kw} के बारे में है।
""", "train/slot/department"),
        "product": _table("""
en=It is about my {kw}.|Product: {kw}.|The affected device is the {kw}.
de=Es geht um mein Gerät: {kw}.|Produkt: {kw}.|Betroffenes Gerät: {kw}.
fr=Il s'agit de mon appareil : {kw}.|Produit : {kw}.|Appareil concerné : {kw}.
es=Se trata de mi dispositivo: {kw}.|Producto: {kw}.|Dispositivo afectado: {kw}.
ru=Речь о моём устройстве: {kw}.|Продукт: {kw}.|Затронутое устройство: {kw}.
zh=是关于我的{kw}。|产品：{kw}。|出问题的设备是{kw}。
ja=私の{kw}についてです。|製品：{kw}。|対象の機器は{kw}です。
hi=बात मेरे {kw} की है।|उत्पाद: {kw}।|प्रभावित डिवाइस: {kw}।
""", "train/slot/product"),
        "urgency": _table("""
en=Priority: {t}.|I would call this {t}.|Impact level: {t}.
de=Priorität: {t}.|Ich würde das als {t} einstufen.|Auswirkung: {t}.
fr=Priorité : {t}.|Je qualifierais cela de {t}.|Niveau d'impact : {t}.
es=Prioridad: {t}.|Yo lo calificaría como {t}.|Nivel de impacto: {t}.
ru=Приоритет: {t}.|Я бы оценил это как «{t}».|Уровень влияния: {t}.
zh=优先级：{t}。|我认为这属于{t}级别。|影响程度：{t}。
ja=優先度：{t}。|これは{t}レベルだと思います。|影響度：{t}。
hi=प्राथमिकता: {t}।|मैं इसे {t} मानूँगा।|असर का स्तर: {t}।
""", "train/slot/urgency"),
        "mood": _table("""
en=Honestly, I am {t}.|My mood right now: {t}.|I feel {t} about this.
de=Ehrlich gesagt bin ich {t}.|Meine Stimmung gerade: {t}.|Ich bin darüber {t}.
fr=Honnêtement, je suis {t}.|Mon humeur du moment : {t}.|Je me sens {t} à ce sujet.
es=Sinceramente, estoy {t}.|Mi estado de ánimo ahora: {t}.|Me siento {t} con esto.
ru=Честно говоря, я {t}.|Моё настроение сейчас: {t}.|По этому поводу я {t}.
zh=说实话，我很{t}。|我现在的心情：{t}。|对此我感到{t}。
ja=正直、{t}です。|今の気分：{t}。|この件について一言：{t}。
hi=सच कहूँ तो मैं {t} हूँ।|अभी मेरा मूड: {t}।|इस बात से मैं {t} हूँ।
""", "train/slot/mood"),
        "rating": _table("""
en=I would rate you {n} out of {m}.|Rating: {n}/{m}.|My score: {n} of {m}.
de=Ich gebe {n} von {m} Punkten.|Bewertung: {n}/{m}.|Meine Note: {n} von {m}.
fr=Je mets {n} sur {m}.|Note : {n}/{m}.|Mon score : {n} sur {m}.
es=Les doy un {n} de {m}.|Valoración: {n}/{m}.|Mi puntuación: {n} de {m}.
ru=Ставлю {n} из {m}.|Оценка: {n}/{m}.|Мой балл: {n} из {m}.
zh=我打{n}分（满分{m}分）。|评分：{n}/{m}。|我的分数：{m}分中的{n}分。
ja={m}点中{n}点です。|評価：{n}/{m}。|私のスコア：{n}（{m}点満点）。
hi=मैं {m} में से {n} दूँगा।|रेटिंग: {n}/{m}।|मेरा स्कोर: {m} में से {n}।
""", "train/slot/rating"),
    },
    fillers=_table("""
en=Thanks in advance for your help.|I have been a customer for a few years now.|The weather here has been rainy all week.|I first looked for an answer on your website.|A colleague suggested that I write to you directly.|Let me know if you need more details from me.|I am usually available in the afternoon.|We are a small team based in the city centre.|Sorry for the long message.|I am writing this from my office.|Our company has about fifty employees.|I hope this reaches the right person.
de=Vielen Dank im Voraus für Ihre Hilfe.|Ich bin seit einigen Jahren Kunde bei Ihnen.|Hier regnet es schon die ganze Woche.|Ich habe zuerst auf Ihrer Webseite nach einer Antwort gesucht.|Eine Kollegin hat mir geraten, Ihnen direkt zu schreiben.|Melden Sie sich, wenn Sie weitere Details brauchen.|Nachmittags bin ich meistens erreichbar.|Wir sind ein kleines Team in der Innenstadt.|Entschuldigen Sie die lange Nachricht.|Ich schreibe Ihnen aus meinem Büro.|Unsere Firma hat etwa fünfzig Mitarbeiter.|Ich hoffe, das erreicht die richtige Person.
fr=Merci d'avance pour votre aide.|Je suis client chez vous depuis quelques années.|Il pleut ici toute la semaine.|J'ai d'abord cherché une réponse sur votre site web.|Une collègue m'a conseillé de vous écrire directement.|Dites-moi si vous avez besoin de plus de détails.|Je suis généralement disponible l'après-midi.|Nous sommes une petite équipe en centre-ville.|Désolé pour ce long message.|Je vous écris depuis mon bureau.|Notre société a une cinquantaine de salariés.|J'espère que ceci parviendra à la bonne personne.
es=Gracias de antemano por su ayuda.|Soy cliente suyo desde hace algunos años.|Aquí ha llovido toda la semana.|Primero busqué una respuesta en su sitio web.|Una compañera me sugirió escribirles directamente.|Avísenme si necesitan más detalles.|Suelo estar disponible por la tarde.|Somos un equipo pequeño en el centro de la ciudad.|Perdón por el mensaje tan largo.|Les escribo desde mi oficina.|Nuestra empresa tiene unos cincuenta empleados.|Espero que esto llegue a la persona adecuada.
ru=Заранее спасибо за помощь.|Я ваш клиент уже несколько лет.|У нас всю неделю идут дожди.|Сначала я искал ответ на вашем сайте.|Коллега посоветовала написать вам напрямую.|Дайте знать, если нужны подробности.|Обычно я свободен во второй половине дня.|Мы небольшая команда в центре города.|Извините за длинное сообщение.|Пишу вам из своего офиса.|В нашей компании около пятидесяти сотрудников.|Надеюсь, письмо попадёт к нужному человеку.
zh=提前感谢您的帮助。|我已经是你们的老客户了。|这周这里一直在下雨。|我先在你们的网站上找过答案。|一位同事让我直接联系你们。|如果需要更多细节请告诉我。|我通常下午有空。|我们是市中心的一个小团队。|抱歉消息有点长。|我是在办公室写的这封信。|我们公司大约有五十名员工。|希望这封信能转到合适的人手里。
ja=よろしくお願いいたします。|数年前から御社を利用しています。|こちらは今週ずっと雨です。|まず御社のウェブサイトで答えを探しました。|同僚に直接連絡するよう勧められました。|詳細が必要でしたらお知らせください。|午後ならたいてい対応できます。|私たちは都心の小さなチームです。|長文で失礼します。|オフィスから書いています。|弊社の従業員は約五十名です。|適切な担当者に届くことを願っています。
hi=आपकी मदद के लिए पहले से धन्यवाद।|मैं कुछ सालों से आपका ग्राहक हूँ।|यहाँ पूरे हफ़्ते बारिश हो रही है।|मैंने पहले आपकी वेबसाइट पर जवाब ढूँढा।|एक सहकर्मी ने मुझे सीधे आपको लिखने की सलाह दी।|अगर और जानकारी चाहिए तो बताइए।|मैं आमतौर पर दोपहर में उपलब्ध रहता हूँ।|हम शहर के बीच में एक छोटी टीम हैं।|लंबे संदेश के लिए माफ़ी।|मैं अपने दफ़्तर से लिख रहा हूँ।|हमारी कंपनी में लगभग पचास कर्मचारी हैं।|उम्मीद है यह सही व्यक्ति तक पहुँचेगा।
""", "train/fillers"),
    assistant=_table("""
en=Hello! How can I help you today?|Thanks, let me look into that.|Could you tell me a bit more?|I see, thank you for the details.|Let me check our records.
de=Hallo! Wie kann ich Ihnen heute helfen?|Danke, ich schaue mir das an.|Können Sie mir etwas mehr erzählen?|Verstehe, danke für die Details.|Ich prüfe kurz unsere Unterlagen.
fr=Bonjour ! Comment puis-je vous aider ?|Merci, je regarde cela.|Pouvez-vous m'en dire un peu plus ?|Je vois, merci pour ces détails.|Je vérifie nos dossiers.
es=¡Hola! ¿En qué puedo ayudarle hoy?|Gracias, lo reviso enseguida.|¿Podría contarme un poco más?|Entiendo, gracias por los detalles.|Déjeme revisar nuestros registros.
ru=Здравствуйте! Чем могу помочь?|Спасибо, сейчас посмотрю.|Расскажите, пожалуйста, подробнее.|Понимаю, спасибо за подробности.|Сейчас проверю наши записи.
zh=您好！今天有什么可以帮您？|谢谢，我来看一下。|能再多说一点吗？|明白，谢谢您提供的细节。|我查一下我们的记录。
ja=こんにちは！本日はどのようなご用件でしょうか？|ありがとうございます、確認します。|もう少し詳しく教えていただけますか？|なるほど、詳細をありがとうございます。|記録を確認いたします。
hi=नमस्ते! आज मैं आपकी कैसे मदद कर सकता हूँ?|धन्यवाद, मैं इसे देखता हूँ।|क्या आप थोड़ा और बता सकते हैं?|समझ गया, विवरण के लिए धन्यवाद।|मैं हमारे रिकॉर्ड देखता हूँ।
""", "train/assistant"),
    greetings=_table("""
en=Hello,|Dear support team,
de=Hallo,|Sehr geehrtes Support-Team,
fr=Bonjour,|Chère équipe support,
es=Hola,|Estimado equipo de soporte:
ru=Здравствуйте,|Уважаемая служба поддержки,
zh=您好，|尊敬的客服团队：
ja=こんにちは。|サポートチーム御中
hi=नमस्ते,|प्रिय सहायता टीम,
""", "train/greetings"),
    closings=_table("""
en=Best regards,|Thanks,
de=Viele Grüße,|Danke,
fr=Cordialement,|Merci,
es=Saludos cordiales,|Gracias,
ru=С уважением,|Спасибо,
zh=此致敬礼，|谢谢，
ja=よろしくお願いします。|ありがとうございます。
hi=सादर,|धन्यवाद,
""", "train/closings"),
    case_word=_case_word(0),
    log_filler=("GET /api/v2/items 200 ({n} ms)", "cache refreshed, {n} entries", "heartbeat ok seq={n}",
                "worker {n} started", "scheduled job sync-{n} finished", "connection pool size {n}"),
    log_line="{ts} {level} {svc}: {msg}",
    json_keys=("ticket_id", "channel", "subject", "message", "history"),
)

_HELDOUT = TemplateGroup("heldout", instructions={
        "department": _table("""
en=Which team owns this request?|Who should take care of this case?
de=Welches Team ist für dieses Anliegen zuständig?|Wer sollte sich um diesen Fall kümmern?
fr=Quelle équipe est responsable de cette demande ?|Qui doit s'occuper de ce dossier ?
es=¿Qué equipo se encarga de esta petición?|¿Quién debería ocuparse de este caso?
ru=Какая команда отвечает за это обращение?|Кто должен заняться этим случаем?
zh=这个请求归哪个团队负责？|谁应该跟进这个案例？
ja=この問い合わせを担当するのはどのチームですか？|この案件は誰が対応すべきですか？
hi=यह अनुरोध किस टीम का है?|इस मामले को किसे देखना चाहिए?
""", "heldout/department"),
        "product": _table("""
en=Which item is affected?|Name the product this case refers to.
de=Welcher Artikel ist gemeint?|Nenne das Produkt, auf das sich der Fall bezieht.
fr=Quel article est en cause ?|Nomme le produit visé par ce dossier.
es=¿Qué artículo está implicado?|Indica el producto al que se refiere el caso.
ru=Какой товар имеется в виду?|Назови продукт, к которому относится обращение.
zh=受影响的是哪件商品？|指出这个案例对应的产品。
ja=問題のある商品はどれですか？|この案件が指している製品を答えてください。
hi=किस सामान की बात हो रही है?|इस मामले से जुड़ा उत्पाद बताएं।
""", "heldout/product"),
        "urgency": _table("""
en=How quickly does this need attention?|Grade how important this case is.
de=Wie schnell muss sich jemand darum kümmern?|Stufe die Wichtigkeit dieses Falls ein.
fr=À quelle vitesse faut-il s'en occuper ?|Classe le niveau de ce dossier.
es=¿Con qué rapidez hay que atender esto?|Clasifica el nivel de este caso.
ru=Как быстро нужно на это отреагировать?|Определи уровень важности этого случая.
zh=需要多快处理这件事？|给这个案例的重要性定级。
ja=どのくらい早く対応が必要ですか？|この案件の重要度を格付けしてください。
hi=इस पर कितनी जल्दी ध्यान देना होगा?|इस मामले की अहमियत का दर्जा तय करें।
""", "heldout/urgency"),
        "mood": _table("""
en=Judge the sender's attitude.|What state of mind is the customer in?
de=Beurteile die Haltung des Absenders.|Wie ist die Gemütslage des Absenders?
fr=Juge l'attitude de l'expéditeur.|Quel est l'état d'esprit du client ?
es=Juzga la actitud del remitente.|¿Qué disposición muestra el cliente?
ru=Оцени отношение отправителя.|Каково душевное состояние клиента?
zh=判断发件人的态度。|客户的心态怎样？
ja=送信者の態度を判断してください。|お客様の心境はどうですか？
hi=भेजने वाले के रवैये को परखें।|ग्राहक की मनोदशा कैसी है?
""", "heldout/mood"),
        "rating": _table("""
en=How many points did the user award?|Extract the star rating.
de=Wie viele Punkte hat der Nutzer vergeben?|Ermittle die Sternebewertung.
fr=Combien de points l'utilisateur a-t-il accordés ?|Extrais le nombre d'étoiles.
es=¿Cuántos puntos otorgó el usuario?|Extrae la cantidad de estrellas.
ru=Сколько баллов дал пользователь?|Извлеки количество звёзд.
zh=用户打了几分？|提取星级评分。
ja=ユーザーは何ポイントを与えましたか？|星の数を抜き出してください。
hi=उपयोगकर्ता ने कितने अंक दिए?|स्टार रेटिंग निकालें।
""", "heldout/rating"),
        "severity": _table("""
en=At which level was the notable event logged?|Determine the log level of the anomaly.
de=Auf welchem Level wurde das auffällige Ereignis protokolliert?|Bestimme das Log-Level der Anomalie.
fr=À quel niveau l'événement notable a-t-il été journalisé ?|Détermine le niveau de journal de l'anomalie.
es=¿En qué nivel se registró el evento destacado?|Determina el nivel de registro de la anomalía.
ru=С каким уровнем записано заметное событие?|Определи уровень лога для аномалии.
zh=值得注意的事件以什么级别记录？|确定异常的日志级别。
ja=注目すべきイベントはどのレベルで記録されましたか？|異常のログレベルを判定してください。
hi=उल्लेखनीय घटना किस स्तर पर दर्ज हुई?|विसंगति का लॉग स्तर तय करें।
""", "heldout/severity"),
    },
    noul_frames=_table("""
en=Check this claim: {s}|Does the following hold? {s}
de=Prüfe diese Aussage: {s}|Trifft Folgendes zu? {s}
fr=Vérifie cette affirmation : {s}|Ce qui suit est-il exact ? {s}
es=Comprueba esta afirmación: {s}|¿Se cumple lo siguiente? {s}
ru=Проверь утверждение: {s}|Выполняется ли следующее? {s}
zh=核实这个说法：{s}|以下内容成立吗？{s}
ja=この主張を確認してください：{s}|次の内容は成り立ちますか？{s}
hi=इस दावे की जाँच करें: {s}|क्या यह सही है? {s}
""", "heldout/noul"),
    slots={
        "department": _table("""
en=Quick note regarding {kw}.|Topic of my request: {kw}.
de=Kurze Info zum Thema {kw}.|Worum es geht: {kw}.
fr=Petite remarque au sujet de : {kw}.|Thème de ma demande : {kw}.
es=Una nota rápida sobre: {kw}.|Tema de mi solicitud: {kw}.
ru=Коротко по вопросу «{kw}».|Суть обращения: {kw}.
zh=简单说一下{kw}的事。|我的请求主题是：{kw}。
ja={kw}の件で少しご相談です。|依頼のテーマ：{kw}。
hi={kw} के बारे में एक छोटी सी बात।|मेरे अनुरोध का विषय: {kw}।
""", "heldout/slot/department"),
        "product": _table("""
en=I use the {kw} every day.|Item in question: {kw}.
de=Ich benutze das Gerät ({kw}) täglich.|Fraglicher Artikel: {kw}.
fr=J'utilise cet appareil ({kw}) tous les jours.|Article en question : {kw}.
es=Uso este dispositivo ({kw}) a diario.|Artículo en cuestión: {kw}.
ru=Пользуюсь этим устройством ({kw}) каждый день.|Товар: {kw}.
zh=我每天都用这台{kw}。|相关商品：{kw}。
ja=この{kw}は毎日使っています。|該当商品：{kw}。
hi=मैं यह {kw} रोज़ इस्तेमाल करता हूँ।|संबंधित सामान: {kw}।
""", "heldout/slot/product"),
        "urgency": _table("""
en=From my side this is {t}.|Severity as I see it: {t}.
de=Aus meiner Sicht ist das {t}.|Schweregrad meiner Einschätzung nach: {t}.
fr=De mon côté, c'est {t}.|Gravité selon moi : {t}.
es=Por mi parte, esto es {t}.|Severidad según yo: {t}.
ru=С моей стороны это {t}.|Важность, по-моему: {t}.
zh=在我看来这是{t}的。|我判断的等级：{t}。
ja=私から見ると{t}です。|重大度の見立て：{t}。
hi=मेरी नज़र में यह {t} है।|मेरे हिसाब से दर्जा: {t}।
""", "heldout/slot/urgency"),
        "mood": _table("""
en=To be frank, I'm {t}.|Current feeling: {t}.
de=Offen gesagt: {t}.|Aktuelles Gefühl: {t}.
fr=Pour être franc : {t}.|Ressenti actuel : {t}.
es=Para ser franco: {t}.|Sensación actual: {t}.
ru=Откровенно: {t}.|Текущее ощущение: {t}.
zh=坦白讲：{t}。|当前感受：{t}。
ja=率直に言うと：{t}。|現在の気持ち：{t}。
hi=साफ़ कहूँ तो: {t}।|मौजूदा भावना: {t}।
""", "heldout/slot/mood"),
        "rating": _table("""
en=I'm giving {n} points out of {m}.|Stars: {n} (max {m}).
de=Von mir gibt es {n} Punkte (maximal {m}).|Sterne: {n} von {m}.
fr=Je donne {n} points sur {m}.|Étoiles : {n} (max {m}).
es=Otorgo {n} puntos de {m}.|Estrellas: {n} (máx. {m}).
ru=Даю {n} баллов из {m}.|Звёзды: {n} (максимум {m}).
zh=给{n}分，总分{m}。|星级：{n}（最高{m}）。
ja={n}ポイントを付けます（最大{m}）。|星：{n}（最大{m}）。
hi=मैं {n} अंक देता हूँ ({m} में से)।|स्टार: {n} (अधिकतम {m})।
""", "heldout/slot/rating"),
    },
    fillers=_table("""
en=Hope your week is going well.|I found your company through a friend.|Our office moved to a new building last spring.|Feel free to reply at any time.|I appreciate the quick responses so far.|It is a busy season for us.|I am writing during my lunch break.|My manager asked me to follow up.
de=Ich hoffe, Ihre Woche läuft gut.|Ein Freund hat mir Ihre Firma empfohlen.|Unser Büro ist im Frühjahr in ein neues Gebäude umgezogen.|Antworten Sie gern jederzeit.|Danke für die bisher schnellen Antworten.|Gerade ist bei uns viel los.|Ich schreibe in meiner Mittagspause.|Mein Vorgesetzter bat mich, nachzufassen.
fr=J'espère que votre semaine se passe bien.|Un ami m'a recommandé votre entreprise.|Notre bureau a déménagé dans un nouveau bâtiment au printemps.|Vous pouvez répondre à tout moment.|Merci pour vos réponses rapides jusqu'ici.|C'est une période chargée pour nous.|Je vous écris pendant ma pause déjeuner.|Mon responsable m'a demandé de relancer.
es=Espero que su semana vaya bien.|Un amigo me recomendó su empresa.|Nuestra oficina se mudó a un edificio nuevo en primavera.|Pueden responder cuando quieran.|Agradezco las respuestas rápidas hasta ahora.|Es una temporada de mucho trabajo para nosotros.|Les escribo en mi pausa para comer.|Mi jefe me pidió que hiciera seguimiento.
ru=Надеюсь, у вас хорошая неделя.|О вашей компании я узнал от друга.|Весной наш офис переехал в новое здание.|Можете ответить в любое время.|Спасибо за быстрые ответы.|Сейчас у нас горячая пора.|Пишу в обеденный перерыв.|Руководитель попросил меня уточнить.
zh=希望您这周一切顺利。|我是通过朋友知道你们公司的。|我们的办公室今年春天搬进了新大楼。|随时可以回复我。|感谢你们到目前为止的快速回复。|最近我们这边很忙。|我是在午休时间写的。|我的经理让我跟进一下。
ja=よい一週間をお過ごしください。|友人の紹介で御社を知りました。|この春、事務所が新しいビルに移りました。|いつでもご返信ください。|これまでの迅速なご対応に感謝します。|今は繁忙期です。|昼休みに書いています。|上司に確認するよう頼まれました。
hi=उम्मीद है आपका हफ़्ता अच्छा चल रहा है।|आपकी कंपनी के बारे में मुझे एक दोस्त से पता चला।|इस वसंत हमारा दफ़्तर नई इमारत में चला गया।|आप कभी भी जवाब दे सकते हैं।|अब तक के तेज़ जवाबों के लिए शुक्रिया।|यह हमारे लिए व्यस्त समय है।|मैं लंच ब्रेक में लिख रहा हूँ।|मेरे मैनेजर ने मुझसे फ़ॉलो-अप करने को कहा।
""", "heldout/fillers"),
    assistant=_table("""
en=Hi, what can I do for you?|Understood, one moment please.|Got it, thanks for waiting.
de=Hi, was kann ich für Sie tun?|Verstanden, einen Moment bitte.|Alles klar, danke fürs Warten.
fr=Salut, que puis-je faire pour vous ?|Compris, un instant s'il vous plaît.|C'est noté, merci de patienter.
es=Hola, ¿qué puedo hacer por usted?|Entendido, un momento por favor.|De acuerdo, gracias por esperar.
ru=Привет, что я могу для вас сделать?|Понял, минутку.|Ясно, спасибо за ожидание.
zh=嗨，我能为您做些什么？|明白了，请稍等。|收到，感谢您的耐心等待。
ja=どうされましたか？|承知しました、少々お待ちください。|了解しました、お待ちいただきありがとうございます。
hi=हाय, मैं आपके लिए क्या कर सकता हूँ?|समझ गया, एक पल रुकिए।|ठीक है, इंतज़ार के लिए धन्यवाद।
""", "heldout/assistant"),
    greetings=_table("""
en=Hi there,
de=Guten Tag,
fr=Salut,
es=Buenas,
ru=Добрый день,
zh=嗨，
ja=お世話になっております。
hi=हाय,
""", "heldout/greetings"),
    closings=_table("""
en=Warm wishes,
de=Herzliche Grüße,
fr=Bien à vous,
es=Un abrazo,
ru=Всего доброго,
zh=祝好，
ja=敬具
hi=शुभकामनाओं सहित,
""", "heldout/closings"),
    case_word=_case_word(1),
    log_filler=("POST /v3/sessions 201 in {n}ms", "metrics flushed ({n} points)", "health check passed #{n}",
                "consumer lag {n}", "config reloaded rev {n}"),
    log_line="[{ts}] {svc} {level} - {msg}",
    json_keys=("case", "source", "summary", "text", "previous_messages"),
)

_VALIDATION = TemplateGroup("validation", instructions={
        "department": _table("""
en=Which unit should pick up this message?|Assign this case to a team.
de=Welche Einheit soll diese Nachricht übernehmen?|Weise diesen Vorgang einem Team zu.
fr=Quelle unité doit prendre en charge ce message ?|Attribue ce dossier à une équipe.
es=¿Qué unidad debe hacerse cargo de este mensaje?|Asigna este caso a un equipo.
ru=Какое подразделение должно взять это сообщение?|Назначь это обращение команде.
zh=这条消息应该交给哪个部门？|把这个案子分给一个团队。
ja=このメッセージはどの部署が引き受けるべきですか？|この案件をチームに割り当ててください。
hi=यह संदेश किस इकाई को लेना चाहिए?|इस मामले को किसी टीम को सौंपें।
""", "validation/department"),
        "product": _table("""
en=Which product does the sender mean?|Tell me the device in question.
de=Welches Produkt meint der Absender?|Nenne mir das betreffende Gerät.
fr=Quel produit l'expéditeur a-t-il en tête ?|Indique l'appareil en question.
es=¿Qué producto tiene en mente el remitente?|Indica el aparato en cuestión.
ru=Какой продукт имеет в виду отправитель?|Назови нужное устройство.
zh=发件人说的是哪个产品？|说出相关的设备。
ja=送信者はどの製品のことを言っていますか？|関係する機器を答えてください。
hi=भेजने वाला किस उत्पाद की बात कर रहा है?|संबंधित डिवाइस बताएं।
""", "validation/product"),
        "urgency": _table("""
en=How much of a rush is this?|Place this case on the priority scale.
de=Wie viel Eile hat das?|Ordne diesen Vorgang auf der Prioritätsskala ein.
fr=Est-ce pressé, et à quel point ?|Place ce dossier sur l'échelle de priorité.
es=¿Cuánta prisa corre esto?|Sitúa este caso en la escala de prioridad.
ru=Насколько это спешно?|Помести это обращение на шкалу приоритета.
zh=这件事的优先程度是多少？|给这个案子定一个优先级。
ja=これはどのくらい急ぎですか？|この案件の優先度を答えてください。
hi=यह कितनी जल्दी का मामला है?|इस मामले को प्राथमिकता के पैमाने पर रखें।
""", "validation/urgency"),
        "mood": _table("""
en=What is the sender's frame of mind?|Describe how the writer feels.
de=In welcher Verfassung ist der Absender?|Beschreibe, wie sich der Verfasser fühlt.
fr=Dans quel état d'esprit est l'expéditeur ?|Décris ce que ressent l'auteur.
es=¿En qué estado de ánimo está el remitente?|Describe cómo se siente quien escribe.
ru=В каком настроении отправитель?|Опиши, что чувствует автор.
zh=发件人的心情如何？|说说写信人的感受。
ja=送信者はどんな気分ですか？|書き手がどう感じているか答えてください。
hi=भेजने वाले का मन कैसा है?|बताएं कि लिखने वाला कैसा महसूस करता है।
""", "validation/mood"),
        "rating": _table("""
en=What score did the writer hand out?|Report the number of points given.
de=Welche Wertung hat der Verfasser vergeben?|Gib die Zahl der vergebenen Punkte an.
fr=Quelle note l'auteur a-t-il attribuée ?|Indique le nombre de points donnés.
es=¿Qué nota puso quien escribe?|Indica el número de puntos otorgados.
ru=Какую оценку выставил автор?|Укажи число выставленных баллов.
zh=写信人给了什么评分？|报出给出的分数。
ja=書き手は何点を付けましたか？|付けられた点数を答えてください。
hi=लिखने वाले ने कितने अंक दिए?|दिए गए अंकों की संख्या बताएं।
""", "validation/rating"),
        "severity": _table("""
en=Which level does the unusual log entry carry?|Name the log level of the standout line.
de=Welches Level trägt der ungewöhnliche Logeintrag?|Nenne das Log-Level der auffälligen Zeile.
fr=Quel niveau porte l'entrée de journal inhabituelle ?|Donne le niveau de journal de la ligne marquante.
es=¿Qué nivel lleva la entrada de registro inusual?|Indica el nivel de registro de la línea llamativa.
ru=Какой уровень у необычной записи лога?|Назови уровень лога у выделяющейся строки.
zh=这条异常日志记录是什么级别？|说出这条特别日志的级别。
ja=おかしなログ行のレベルは何ですか？|異常なログ記録のレベルを答えてください。
hi=असामान्य लॉग प्रविष्टि का स्तर क्या है?|अलग दिखने वाली पंक्ति का लॉग स्तर बताएं।
""", "validation/severity"),
    },
    noul_frames=_table("""
en=Is this right? {s}|Decide whether it holds: {s}
de=Stimmt das? {s}|Entscheide, ob es zutrifft: {s}
fr=Est-ce juste ? {s}|Décide si c'est le cas : {s}
es=¿Es correcto? {s}|Decide si se cumple: {s}
ru=Это так? {s}|Реши, верно ли: {s}
zh=对不对？{s}|看看这是不是真的：{s}
ja=これは合っていますか？{s}|正しいかどうか判断してください：{s}
hi=क्या यह ठीक है? {s}|क्या यह बात सही बैठती है? {s}
""", "validation/noul"),
    slots={
        "department": _table("""
en=My question is about {kw}.|Regarding {kw}, I need some help.
de=Meine Frage dreht sich um {kw}.|Zum Thema {kw} brauche ich Hilfe.
fr=Ma question porte sur : {kw}.|Au sujet de {kw}, j'ai besoin d'aide.
es=Mi pregunta es sobre: {kw}.|Respecto a {kw}, necesito ayuda.
ru=Мой вопрос про «{kw}».|По поводу «{kw}» нужна помощь.
zh=我的问题与{kw}有关。|关于{kw}，我需要帮助。
ja=お問い合わせは{kw}についてです。|{kw}の件で助けが必要です。
hi=मेरा सवाल {kw} के बारे में है।|{kw} को लेकर मुझे मदद चाहिए।
""", "validation/slot/department"),
        "product": _table("""
en=The {kw} is what I am writing about.|Device: {kw}.
de=Ich schreibe wegen des Geräts ({kw}).|Gerät: {kw}.
fr=J'écris au sujet de l'appareil ({kw}).|Matériel : {kw}.
es=Escribo por el aparato ({kw}).|Equipo: {kw}.
ru=Пишу насчёт устройства ({kw}).|Устройство: {kw}.
zh=我来信是为了{kw}。|设备：{kw}。
ja={kw}の件で連絡しています。|機器：{kw}。
hi=मैं {kw} के बारे में लिख रहा हूँ।|डिवाइस: {kw}।
""", "validation/slot/product"),
        "urgency": _table("""
en=On my scale this is {t}.|The matter is {t}, I would say.
de=Auf meiner Skala ist das {t}.|Die Sache ist {t}, würde ich sagen.
fr=Sur mon échelle, c'est {t}.|L'affaire est {t}, je dirais.
es=En mi escala, esto es {t}.|El asunto es {t}, diría yo.
ru=По моей шкале это {t}.|Вопрос, я бы сказал, {t}.
zh=按我的评估，这是{t}的。|这件事我看是{t}的。
ja=私の尺度では{t}です。|この件は{t}だと言えます。
hi=मेरे पैमाने पर यह {t} है।|मामला {t} है, ऐसा मुझे लगता है।
""", "validation/slot/urgency"),
        "mood": _table("""
en=Right now I feel {t}.|Let me say it plainly: {t}.
de=Gerade fühle ich mich {t}.|Um es klar zu sagen: {t}.
fr=En ce moment, je me sens {t}.|Pour le dire clairement : {t}.
es=Ahora mismo me siento {t}.|Lo digo claro: {t}.
ru=Сейчас я {t}.|Скажу прямо: {t}.
zh=此刻我的心情是{t}。|直说：{t}。
ja=いまの感情：{t}。|はっきり言うと{t}です。
hi=इस समय मैं {t} हूँ।|सीधे कहूँ तो: {t}।
""", "validation/slot/mood"),
        "rating": _table("""
en=My verdict: {n} points of {m}.|I award {n} (out of a possible {m}).
de=Mein Urteil: {n} Punkte von {m}.|Ich vergebe {n} (möglich wären {m}).
fr=Mon verdict : {n} points sur {m}.|J'accorde {n} (sur {m} possibles).
es=Mi veredicto: {n} puntos de {m}.|Concedo {n} (de {m} posibles).
ru=Мой вердикт: {n} баллов из {m}.|Ставлю {n} (из возможных {m}).
zh=我的评价：{n}分，满分{m}分。|给{n}分（满分是{m}）。
ja=私の評価：{m}点中{n}点。|{n}点（満点は{m}点）を付けます。
hi=मेरा फ़ैसला: {m} में से {n} अंक।|मैं {n} अंक देता हूँ (कुल {m})।
""", "validation/slot/rating"),
    },
    fillers=_table("""
en=I hope this finds you well.|We have used your service since last year.|The office is quiet today.|I tried to find the answer in the help pages first.|My neighbour recommended your company.|I can share more information if needed.|Mornings work best for me.|We are a family business of six people.
de=Ich hoffe, es geht Ihnen gut.|Wir nutzen Ihren Dienst seit letztem Jahr.|Im Büro ist es heute ruhig.|Ich habe zuerst in den Hilfeseiten nach einer Antwort gesucht.|Mein Nachbar hat mir Ihre Firma empfohlen.|Ich kann bei Bedarf mehr Informationen schicken.|Vormittags passt es mir am besten.|Wir sind ein Familienbetrieb mit sechs Leuten.
fr=J'espère que vous allez bien.|Nous utilisons votre service depuis l'an dernier.|Le bureau est calme aujourd'hui.|J'ai d'abord cherché la réponse dans les pages d'aide.|Mon voisin m'a recommandé votre société.|Je peux envoyer plus d'informations si besoin.|Le matin me convient le mieux.|Nous sommes une entreprise familiale de six personnes.
es=Espero que se encuentren bien.|Usamos su servicio desde el año pasado.|La oficina está tranquila hoy.|Primero busqué la respuesta en las páginas de ayuda.|Mi vecino me recomendó su empresa.|Puedo enviar más información si hace falta.|Las mañanas me vienen mejor.|Somos un negocio familiar de seis personas.
ru=Надеюсь, у вас всё хорошо.|Мы пользуемся вашим сервисом с прошлого года.|Сегодня в офисе тихо.|Сначала я поискал ответ на страницах помощи.|Ваш сервис мне посоветовал сосед.|Могу прислать больше информации, если нужно.|Мне удобнее всего по утрам.|Мы семейная фирма из шести человек.
zh=希望您一切都好。|我们用你们的服务有一年了。|今天办公室人很少。|我先在帮助中心找过答案。|是同事让我来找你们的。|需要的话我可以提供更多信息。|我上午有空。|我们是一个五人小团队。
ja=いつもありがとうございます。|一年前から御社のサービスを利用しています。|今日は事務所がのんびりしています。|まずヘルプページで答えを探しました。|知り合いに御社を勧められました。|必要ならもっと情報をお送りします。|午前中だと都合がいいです。|私たちは五人の小さな会社です。
hi=आशा है आप ठीक होंगे।|हम पिछले साल से आपकी सेवा इस्तेमाल कर रहे हैं।|आज दफ़्तर में शांति है।|मैंने पहले मदद वाले पन्नों में जवाब ढूँढा।|मेरे पड़ोसी ने आपकी कंपनी की सिफ़ारिश की।|ज़रूरत हो तो मैं और जानकारी भेज सकता हूँ।|सुबह का समय मेरे लिए सबसे अच्छा है।|हम छह लोगों का पारिवारिक कारोबार हैं।
""", "validation/fillers"),
    assistant=_table("""
en=Good day, how may I assist?|Thank you, I am checking now.|Noted, please hold on.
de=Guten Tag, womit kann ich helfen?|Danke, ich prüfe das jetzt.|Notiert, bitte einen Augenblick.
fr=Bonjour, en quoi puis-je être utile ?|Merci, je vérifie maintenant.|C'est noté, un moment.
es=Buen día, ¿en qué le puedo ayudar?|Gracias, lo compruebo ahora.|Anotado, espere un poco.
ru=Добрый день, чем могу быть полезен?|Спасибо, уже проверяю.|Записал, подождите немного.
zh=您好，请问需要什么帮助？|谢谢，我正在查看。|记下了，请等一下。
ja=いらっしゃいませ、どのようなご用でしょうか？|ありがとうございます、ただいま確認中です。|かしこまりました、しばらくお願いします。
hi=नमस्कार, मैं कैसे सहायता करूँ?|धन्यवाद, मैं अभी जाँच रहा हूँ।|नोट कर लिया, थोड़ा रुकिए।
""", "validation/assistant"),
    greetings=_table("""
en=Good morning,
de=Guten Morgen,
fr=Bonjour à vous,
es=Buenos días,
ru=Доброе утро,
zh=你好，
ja=おはようございます。
hi=सुप्रभात,
""", "validation/greetings"),
    closings=_table("""
en=Kind regards,
de=Freundliche Grüße,
fr=Salutations,
es=Atentamente,
ru=С наилучшими пожеланиями,
zh=此致，
ja=どうぞよろしく。
hi=आभार सहित,
""", "validation/closings"),
    case_word=_case_word(2),
    log_filler=("PUT /v1/jobs 204 after {n} ms", "queue depth {n}", "ping ok ({n})", "gc pause {n} ms",
                "lease renewed id={n}"),
    log_line="{ts} | {level} | {svc} | {msg}",
    json_keys=("request_id", "origin", "topic", "body", "earlier"),
)

TEMPLATE_GROUPS: dict[str, TemplateGroup] = {"train": _TRAIN, "heldout": _HELDOUT, "validation": _VALIDATION}


def templates_for(split: str) -> TemplateGroup:
    return TEMPLATE_GROUPS[group_of(split)]
